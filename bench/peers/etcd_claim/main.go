// etcd_claim: the claim workload against etcd, for bench/peers/run.
//
// A claim is one transaction: If(create_revision(key) == 0) Then(put key)
// Else(get key). Succeeded is a first use (ACCEPTED), else a replay
// (REPLAYED). --clients goroutines, each with one claim in flight, share
// --conns gRPC connections (clientv3 multiplexes over HTTP/2). Latency
// from the call to its answer; percentiles from the sorted samples.
// No lease per key: attaching one would add a LeaseGrant round trip per
// claim, which would only make etcd slower (stated in bench/README.md).
//
// Built by bench/peers/run against Debian's golang-etcd-server-dev sources
// (GO111MODULE=off, GOPATH=<tmp>:/usr/share/gocode), offline.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated")
	clients := flag.Int("clients", 1, "concurrent claims")
	conns := flag.Int("conns", 1, "gRPC connections")
	duration := flag.Duration("duration", 10*time.Second, "measured time")
	keys := flag.String("keys", "unique", "unique|replay:PCT")
	flag.Parse()
	pct := 0
	if strings.HasPrefix(*keys, "replay:") {
		fmt.Sscanf(*keys, "replay:%d", &pct)
	} else if *keys != "unique" {
		fmt.Fprintln(os.Stderr, "etcd_claim: --keys unique|replay:PCT")
		os.Exit(2)
	}
	if *clients < 1 || *conns < 1 || *conns > *clients || pct < 0 || pct > 100 {
		fmt.Fprintln(os.Stderr, "etcd_claim: bad flags")
		os.Exit(2)
	}
	eps := strings.Split(*endpoints, ",")
	cs := make([]*clientv3.Client, *conns)
	for i := range cs {
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcd_claim:", err)
			os.Exit(1)
		}
		cs[i] = c
	}
	runID := fmt.Sprintf("%x", time.Now().UnixNano())
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	end := time.Now().Add(*duration)
	var mu sync.Mutex
	var all []time.Duration
	var accepted, replayed, errs int64
	var wg sync.WaitGroup
	for g := 0; g < *clients; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			kv := cs[g%len(cs)]
			rng := rand.New(rand.NewSource(int64(g) + time.Now().UnixNano()))
			var lat []time.Duration
			var acc, rep, er int64
			seq := 0
			for time.Now().Before(end) {
				n := seq
				if pct > 0 && seq > 0 && rng.Intn(100) < pct {
					n = rng.Intn(seq)
				} else {
					seq++
				}
				key := fmt.Sprintf("%s-%d-%d", runID, g, n)
				t := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := kv.Txn(ctx).
					If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, "1")).
					Else(clientv3.OpGet(key)).Commit()
				cancel()
				if !time.Now().Before(end) {
					break
				}
				if err != nil {
					er++
					continue
				}
				lat = append(lat, time.Since(t))
				if resp.Succeeded {
					acc++
				} else {
					rep++
				}
			}
			mu.Lock()
			all = append(all, lat...)
			accepted += acc
			replayed += rep
			errs += er
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return float64(all[i]) / 1e6
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	out := map[string]interface{}{
		"ops_per_sec": float64(accepted+replayed) / duration.Seconds(),
		"ops":         accepted + replayed,
		"p50_ms":      q(0.5),
		"p99_ms":      q(0.99),
		"p999_ms":     q(0.999),
		"outcomes":    map[string]int64{"ACCEPTED": accepted, "REPLAYED": replayed},
		"errors":      map[string]int64{"ERR": errs},
		"cpu_user_s":  tv(r1.Utime) - tv(r0.Utime),
		"cpu_sys_s":   tv(r1.Stime) - tv(r0.Stime),
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	for _, c := range cs {
		c.Close()
	}
}
