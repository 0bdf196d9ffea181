package chaos

// jsonType is the header every mutating request of the API needs.
var jsonType = map[string]string{"Content-Type": "application/json"}
