;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.idempotent
  "The idempotent workload: IDEMPOTENT records in a fresh scope,
  keys o-0, o-1, ..., one payload hash per key, a short owner lease
  (--lease, default 3s: longer than a call's timeout, see jepsen/README.md
  Limits, short enough for takeovers within a run).

  Per key, for a group of as many threads as there are nodes (thread t
  bound to node t mod N): a burst of concurrent first claims through every
  node (one ACCEPTED, the others IN_PROGRESS), then steps chosen from what
  the answers said so far:
  * complete with the newest owner token (at most one successful Complete
    per key; later claims get DUPLICATE with that result; the owner's retry
    of its complete is COMPLETED retry=true);
  * wait past the lease and claim again (an ACCEPTED takeover with a larger
    owner_attempt), then complete with the old, fenced token (NOT_OWNER);
  * release (the next claim takes over), rarely a terminal release (every
    later claim gets FAILED);
  * claims with fresh request ids (IN_PROGRESS, DUPLICATE ...).
  Tokens are only ever the ones ACCEPTED answers returned. After an :info
  the same call is retried with the same request id (probability 0.6)."
  (:require [jepsen [generator :as gen]
                    [independent :as independent]
                    [random :as rand]
                    [util :as util]]
            [once.jepsen.gens :as g])
  (:import (java.util Base64)))

(defn- b64 [^String s] (.encodeToString (Base64/getEncoder) (.getBytes s "UTF-8")))

(defn claim-value [scope k lease]
  {:scope scope :request-id (g/fresh-rid) :kind "IDEMPOTENT" :idempotent true
   :payload-hash (format "%08x" (bit-and 0xffffffff (hash k))) :lease lease})

(defn- lease-s [lease]
  (let [[_ n u] (re-matches #"(\d+)(ms|s)" lease)]
    (if (= "ms" u) (/ (Long/parseLong n) 1000.0) (Double/parseDouble (or n "3")))))

(defn- now-plus [ctx secs] (+ (:time ctx) (long (* secs 1e9))))

(defrecord IdemKey [k scope lease n burst-left inflight mine tokens completed? left not-before]
  ;; inflight: request ids of our calls still open; mine: every request id we
  ;; sent; tokens: [token attempt] of ACCEPTED answers, oldest first
  gen/Generator
  (op [this test ctx]
    (let [emit (fn [f v this]
                 (let [o (gen/fill-in-op {:f f :value v} ctx)]
                   (if (= :pending o)
                     [:pending this]
                     [(cond-> o (< (:time o) not-before) (assoc :time not-before))
                      (assoc this
                             :inflight (conj inflight (:request-id v))
                             :mine (conj mine (:request-id v)))])))]
      (cond
        (pos? burst-left)
        (emit :claim (claim-value scope k lease) (assoc this :burst-left (dec burst-left)))

        (seq inflight) [:pending this]
        (<= left 0) nil

        :else
        (let [[tok] (peek tokens)
              old   (when (< 1 (count tokens)) (first (nth tokens (- (count tokens) 2))))
              x     (rand/double)
              this  (assoc this :left (dec left))]
          (cond
            ;; the owner completes (again after completion: a retry of the same token)
            (and tok (< x 0.45))
            (emit :complete {:scope scope :request-id (g/fresh-rid) :owner-token tok
                             :result-b64 (b64 (str k "-result"))}
                  this)
            ;; a fenced token: the previous owner's complete after a takeover
            (and old (< x 0.6))
            (emit :complete {:scope scope :request-id (g/fresh-rid) :owner-token old
                             :result-b64 (b64 (str k "-stale"))}
                  this)
            ;; wait past the lease, then claim: a takeover when not completed
            (and tok (not completed?) (< x 0.75))
            (emit :claim (claim-value scope k lease)
                  (assoc this :not-before (now-plus ctx (+ 0.5 (lease-s lease)))))
            ;; release: the next claim takes over; rarely terminal
            (and tok (not completed?) (< x 0.82))
            (emit :release (cond-> {:scope scope :request-id (g/fresh-rid) :owner-token tok}
                             (< (rand/double) 0.15) (assoc :terminal true :error "declined"))
                  this)
            :else
            (emit :claim (claim-value scope k lease)
                  (assoc this :not-before (now-plus ctx (* 0.4 (rand/double))))))))))

  (update [this test ctx event]
    (let [v   (:value event)
          v   (if (independent/tuple? v) (val v) v)
          rid (:request-id v)]
      (if (or (= :invoke (:type event)) (not (contains? mine rid)))
        this
        (cond-> (assoc this :inflight (disj inflight rid))
          (and (= :ok (:type event)) (= :claim (:f event)) (= "ACCEPTED" (:outcome v))
               (:owner-token v) (not (some #{(:owner-token v)} (map first tokens))))
          (assoc :tokens (conj tokens [(:owner-token v) (:owner-attempt v)]))
          (and (= :ok (:type event)) (= :complete (:f event)) (= "COMPLETED" (:outcome v)))
          (assoc :completed? true))))))

(defn key-gen
  [scope keys-atom n lease gap k]
  (swap! keys-atom conj k)
  [(gen/sleep gap)
   (gen/synchronize
     (map->IdemKey {:k k :scope scope :lease lease :n n :burst-left n :inflight #{} :mine #{}
                    :tokens [] :completed? false :left (+ 3 (rand/long 6)) :not-before 0}))])

(defn workload
  "{:generator :final-generator :scope :keys}: options :nodes,
  :concurrency (a multiple of the node count), :rate (approximate), :lease."
  [test]
  (let [scope  (g/fresh-scope "jepsen-idem")
        keys   (atom #{})
        n      (count (:nodes test))
        lease  (:lease test "3s")
        groups (max 1 (quot (:concurrency test) n))
        rate   (double (:rate test 50))
        gap    (max 0.0 (- (/ (* groups (+ n 5)) rate) 2.0))]
    {:scope     scope
     :keys      keys
     :generator (g/retry-info
                  0.6
                  (independent/concurrent-generator
                    n (map #(str "o-" %) (range)) (partial key-gen scope keys n lease gap)))
     :final-generator
     (fn [members-fn]
       (g/final-probes test keys members-fn
                       (fn [k] (dissoc (claim-value scope k lease) :request-id))))}))
