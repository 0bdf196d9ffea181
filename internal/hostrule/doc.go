// Package hostrule reads and matches the entries of a host list
// (connector.allow_hosts, connector.deny_hosts): a host name or IP address
// (any port), host:port ([v6]:port), or a CIDR prefix. Names match a URL's
// host, addresses and prefixes also every address dialed.
//
// It is a leaf, so that the config check of the lists and the connector
// driver that applies them read an entry the same way without importing
// each other.
package hostrule
