// Command example is the README's example: against scripts/run's cluster
// (HTTP ports 7121-7123), or the nodes given as arguments.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"once.example/once"
)

func main() {
	nodes := []string{"127.0.0.1:7121", "127.0.0.1:7122", "127.0.0.1:7123"}
	if len(os.Args) > 1 {
		nodes = os.Args[1:]
	}
	c, err := once.New(once.Config{Nodes: nodes})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.Claim(ctx, once.ClaimRequest{Scope: "webhooks", Key: "evt_1"}) // ACCEPTED, then REPLAYED
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claim:", a.Outcome)
	id, err := once.Do(ctx, c, "orders", "o-go-42", func(ctx context.Context) (string, error) {
		return "charge-7", nil // runs at most once per key, whoever calls
	}, nil)
	fmt.Println("charge:", id, err)
}
