;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.gens
  "Generator pieces the workloads share: fresh request ids, client retries
  with the same request id after an :info, and the final probes (R7)."
  (:require [jepsen [generator :as gen]
                    [independent :as independent]
                    [random :as rand]]
            [once.jepsen.client :as oc]))

(defn fresh-rid
  "A fresh request id: 32 hex digits (libonce's form), from Jepsen's seeded
  RNG; a fresh scope per run keeps ids of two runs apart."
  []
  (format "%016x%016x" (rand/long) (rand/long)))

(defn fresh-scope
  "A scope no earlier run used (the checker assumes a record lives for the
  whole run and was absent at its start)."
  [prefix]
  (str prefix "-" (System/currentTimeMillis) "-" (subs (fresh-rid) 0 8)))

(defrecord RetryInfo [gen p invoked pending]
  ;; invoked: process -> its open invocation; pending: values to retry
  gen/Generator
  (op [this test ctx]
    (if-let [[f v] (first pending)]
      (let [o (gen/fill-in-op {:f f :value v} ctx)]
        (if (= :pending o)
          [:pending this]
          [o (assoc this :pending (subvec pending 1))]))
      (when-let [[o g'] (gen/op gen test ctx)]
        [o (assoc this :gen g')])))

  (update [this test ctx event]
    (let [this (assoc this :gen (gen/update gen test ctx event))
          proc (:process event)]
      (cond
        (not (integer? proc)) this
        (= :invoke (:type event)) (assoc-in this [:invoked proc] event)
        :else
        (let [inv  (get invoked proc)
              this (assoc this :invoked (dissoc invoked proc))]
          (if (and inv (= :info (:type event))
                   (#{:claim :complete :release} (:f inv))
                   (< (rand/double) p))
            (assoc this :pending (conj pending [(:f inv) (:value inv)]))
            this))))))

(defn retry-info
  "Wraps a client generator: after an :info completion, with probability p
  the same call (same value, so the same request id) is invoked again by the
  next free thread: a client retry, which the checker treats as the same
  logical op (ACCEPTED retry=true if the first had applied)."
  [p gen]
  (->RetryInfo gen p {} []))

(def final-probe-s
  "Seconds all final probes may take (jepsen/local: 120 s + 50 ms a key).
  Keys still without a definite answer then fail the run (R7
  final-probe-not-definite)."
  300)

(defn final-probes
  "The final probes (R7): for every key in keys-atom, one claim with a fresh
  request id through every member, thread i (bound to node i) probing
  through node i. members-fn gives the member nodes when the phase starts.
  An :info or :fail probe is retried with the same request id until it is
  :ok, all within final-probe-s seconds. value-fn makes the claim's value
  for a key."
  [test keys-atom members-fn value-fn]
  (gen/time-limit
   final-probe-s
   (gen/clients
    (apply gen/any
           (for [[i node] (map-indexed vector (:nodes test))]
             (gen/on-threads #{i}
                             (delay
                               (when (some #{node} (members-fn))
                                 (for [k (sort (distinct @keys-atom))]
                                   (let [v (assoc (value-fn k) :request-id (fresh-rid) :final true)]
                                     (gen/until-ok
                                       (gen/repeat {:f :claim :value (independent/tuple k v)}))))))))))))
