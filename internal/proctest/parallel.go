package proctest

import (
	"flag"
	"runtime"
	"strconv"
)

// ParallelAtLeast makes the package's parallel tests run n at a time
// instead of GOMAXPROCS (go test's -parallel default), unless -parallel
// was given or GOMAXPROCS is n or more. Call it from TestMain, before
// m.Run. It is for packages whose tests mostly wait on child processes,
// servers and timers: on 2 cores, 2 at a time leaves the machine mostly
// idle while they wait (e2e used about a third of a core on average).
func ParallelAtLeast(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); f != nil && !given && runtime.GOMAXPROCS(0) < n {
		_ = f.Value.Set(strconv.Itoa(n))
	}
}
