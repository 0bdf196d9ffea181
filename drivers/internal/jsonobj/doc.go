// Package jsonobj reads JSON object bodies member by member, so that a
// driver can say exactly which member is at fault
// ("providerConfig.timeout must be a duration like \"5s\"").
package jsonobj
