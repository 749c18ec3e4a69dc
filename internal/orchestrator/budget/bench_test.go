package budget_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// benchStore is a started Store on an embedded server with defs.
func benchStore(b *testing.B, defs ...budget.Def) *budget.Store {
	b.Helper()
	srv := natstest.Start(b)
	nc := natstest.Connect(b, srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range defs {
		if err := budget.Set(context.Background(), j, d); err != nil {
			b.Fatal(err)
		}
	}
	s, err := budget.New(budget.Config{JS: j, Logger: natstest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// BenchmarkCharge measures a charge of one budget: one PubAck round trip
// to the counter stream (file storage, embedded server, loopback).
func BenchmarkCharge(b *testing.B) {
	s := benchStore(b, budget.Def{Name: "b", Tenant: "acme", Period: budget.Day, Limit: 1 << 60})
	c := call("acme", "", "search", 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Charge(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChargeRolling measures a charge of a rolling window of 1h (60
// sub-periods of 1m): a round trip, and a read of the sub-period that
// closed in the last 2 seconds.
func BenchmarkChargeRolling(b *testing.B) {
	s := benchStore(b, budget.Def{Name: "r", Tenant: "acme", Window: time.Hour, Limit: 1 << 60})
	c := call("acme", "", "search", 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Charge(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChargeParallel is BenchmarkCharge from GOMAXPROCS goroutines
// (the throughput of one replica on one budget).
func BenchmarkChargeParallel(b *testing.B) {
	s := benchStore(b, budget.Def{Name: "b", Tenant: "acme", Period: budget.Day, Limit: 1 << 60})
	c := call("acme", "", "search", 1)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Charge(context.Background(), c); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkChargeNone is a charge no budget applies to.
func BenchmarkChargeNone(b *testing.B) {
	s := benchStore(b, budget.Def{Name: "b", Tenant: "acme", Period: budget.Day, Limit: 1})
	c := call("other", "", "search", 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Charge(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKVCompareAndSet is the alternative to the counter stream that
// docs/decisions.md compares: a read and a compare-and-set write of a KV
// key per charge, again on a conflict. Parallel, as BenchmarkChargeParallel.
func BenchmarkKVCompareAndSet(b *testing.B) {
	srv := natstest.Start(b)
	j, err := js.New(natstest.Connect(b, srv.ClientURL()))
	if err != nil {
		b.Fatal(err)
	}
	kv, err := j.CreateKeyValue(context.Background(), js.KeyValueConfig{Bucket: "cas"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "b", []byte("0")); err != nil {
		b.Fatal(err)
	}
	var conflicts atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			for {
				e, err := kv.Get(ctx, "b")
				if err != nil {
					b.Error(err)
					return
				}
				n, _ := strconv.ParseInt(string(e.Value()), 10, 64)
				if _, err := kv.Update(ctx, "b", strconv.AppendInt(nil, n+1, 10), e.Revision()); err == nil {
					break
				}
				conflicts.Add(1)
			}
		}
	})
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
}
