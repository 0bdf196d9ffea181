// Package coalesce shares one run of an expensive computation among the
// callers that ask for it while it runs (the drift report: a full relist
// of the store), so that N concurrent callers cost one computation, not N.
package coalesce
