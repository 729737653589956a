//go:build franz_1_21

package main

import "github.com/twmb/franz-go/pkg/kgo"

// serverSideBalancer: franz-go 1.21 (built with -tags franz_1_21 against
// franz-1.21.5.mod) has no KIP-848 consumer protocol.
func serverSideBalancer() (kgo.Opt, bool) { return nil, false }
