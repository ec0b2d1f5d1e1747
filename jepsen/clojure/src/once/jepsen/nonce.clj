;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.nonce
  "The nonce workload: a fresh scope per run, keys n-0, n-1, ...,
  NONCE claims with the default 24 h TTL and no ts (no record expires during
  a run).

  * Bursts: jepsen.independent/concurrent-generator gives each key to a
    group of as many threads as there are nodes, thread t bound to node
    t mod N, so a key's first claims go out at once through every node,
    each with its own fresh request id (concurrent first claims).
  * Replays: the rest of a key's claims, staggered, carry fresh request ids
    (expected REPLAYED naming the winner).
  * Revisits: one group of threads claims random earlier keys (fresh request
    ids), so one key's history spans many nemesis events.
  * Retries: after an :info, the same call again with the same request id
    (probability 0.6), as a client retry.
  * Final probes: every key through every member (R7)."
  (:require [jepsen [generator :as gen]
                    [independent :as independent]
                    [random :as rand]]
            [once.jepsen.gens :as g]))

(defn claim-value [scope]
  {:scope scope :request-id (g/fresh-rid) :kind "NONCE"})

(defn key-gen
  "One key's claims, for its group of n threads (one per node): a pause of
  gap seconds (pacing: --rate), then a burst of n first claims released
  together (gen/synchronize waits until the whole group is free), then 0-4
  replays staggered about 0.3 s apart."
  [scope keys-atom n gap k]
  (swap! keys-atom conj k)
  [(gen/sleep gap)
   (gen/synchronize
     (for [_ (range n)] {:f :claim :value (claim-value scope)}))
   (->> (fn [] {:f :claim :value (claim-value scope)})
        (gen/limit (rand/long 5))
        (gen/stagger 0.3))])

(defn revisit-gen
  "Claims of random earlier keys with fresh request ids (a short sleep while
  there is none yet: a function generator that returned nil would end)."
  [scope keys-atom]
  (fn []
    (if-let [ks (seq @keys-atom)]
      {:f :claim :value (independent/tuple (rand/nth (vec ks)) (claim-value scope))}
      (gen/sleep 0.5))))

(defn workload
  "{:generator :final-generator :scope :keys}. Test options used: :nodes,
  :concurrency (a multiple of the node count, at least 2n: n threads
  revisit, the other groups of n do bursts), :rate (approximate total
  ops/s: 30% revisits, 70% bursts and replays)."
  [test]
  (let [scope  (g/fresh-scope "jepsen-nonce")
        keys   (atom #{})
        n      (count (:nodes test))
        groups (max 1 (dec (quot (:concurrency test) n)))
        rate   (double (:rate test 50))
        ;; a group's cycle: n + 2 claims on average; 0.6 s of replay staggering
        gap    (max 0.0 (- (/ (* groups (+ n 2)) (* 0.7 rate)) 0.6))
        keys-s (map #(str "n-" %) (range))
        bursts (independent/concurrent-generator n keys-s (partial key-gen scope keys n gap))]
    {:scope     scope
     :keys      keys
     :generator (g/retry-info
                  0.6
                  (if (<= (* 2 n) (:concurrency test))
                    (gen/reserve n (gen/stagger (/ 1 (* 0.3 rate)) (revisit-gen scope keys))
                                 bursts)
                    bursts))
     :final-generator
     (fn [members-fn]
       (g/final-probes test keys members-fn (fn [_k] {:scope scope :kind "NONCE"})))}))
