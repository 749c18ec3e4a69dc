package cli_test

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/toolpool/toolpool/internal/cli"
)

// greetCommand is a command as the binaries define theirs.
func greetCommand() *cli.Command {
	var loud bool
	return &cli.Command{
		Name:    "greet",
		Args:    "[flags] NAME",
		Summary: "say hello",
		Help:    "Says hello to NAME. Exit 0, or 2 on usage errors.",
		MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&loud, "loud", false, "shout")
		},
		Run: func(_ context.Context, env *cli.Env, args []string) error {
			greeting := "hello " + args[0]
			if loud {
				greeting = "HELLO " + args[0] + "!"
			}
			fmt.Fprintln(env.Stdout, greeting)
			return nil
		},
	}
}

func Example() {
	root := &cli.Command{Name: "tool", Commands: []*cli.Command{greetCommand()}}
	ctx := context.Background()

	code := cli.Main(ctx, root, []string{"greet", "--loud", "world"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	code = cli.Main(ctx, root, []string{"greet", "--quiet", "world"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	code = cli.Main(ctx, root, []string{"help", "greet"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// HELLO world!
	// exit 0
	// tool greet: flag provided but not defined: -quiet
	// Run "tool greet -h" for its flags.
	// exit 2
	// usage: tool greet [flags] NAME
	//
	// Says hello to NAME. Exit 0, or 2 on usage errors.
	//
	// flags:
	//   -loud
	//     	shout
	// exit 0
}
