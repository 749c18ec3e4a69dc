package tools

// FastChecked reports whether r's input is validated with the fast check,
// for the tests of package tools_test.
func FastChecked(r *Registered) bool {
	v, ok := r.validator.(*jsonschemaValidator)
	return ok && v.fast != nil
}
