package cli

import "github.com/toolpool/toolpool/jetstream"

// CheckToken checks that the value of the flag name is one subject token
// (an --instance: 1 to 64 letters, digits, '_' and '-'), as a usage error
// naming the flag.
func CheckToken(name, value string) error {
	if err := jetstream.CheckToken(name, value); err != nil {
		return Usagef("%v", err)
	}
	return nil
}

// RedactURL is a server URL, or a list of them, with passwords and tokens
// replaced, fit for logs.
func RedactURL(urls string) string { return jetstream.RedactURL(urls) }
