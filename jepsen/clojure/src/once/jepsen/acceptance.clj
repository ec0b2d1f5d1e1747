;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.acceptance
  "The seed article's acceptance sequence (jepsen/README.md, 'Acceptance sequence'), as a
  Jepsen workload: every step is a normal history op (so R1-R10 and Knossos
  apply) tagged with its :step, and the acceptance checker asserts each
  step's expected outcome. Needs 5 hosts; starts with 3 voters (n1 n2 n3),
  n4 and n5 spare. Thread i is bound to node i, so a step `via nK` runs on
  thread K-1.

   1  claim R (request id r0) via n1: ACCEPTED.
   2  replays of R (fresh request ids) via n2, n3: REPLAYED first=r0.
   3  remove n1, the replica that recorded R (--acceptance-variant:
      follower: n1 a follower; leader: n1 made the leader first, removed by
      `leave`; kill-first: kill -9 n1, then remove the dead member;
      partition: as follower, and the leader is isolated during every later
      membership change). Before n1 is wiped, a replay via zombie n1 must
      not be ACCEPTED; after the removal, replays via n2, n3: REPLAYED r0.
   4  80 filler claims on other keys, a snapshot (so R reaches the new node
      only through InstallSnapshot), add n4 with a fresh id: replays via
      n4, n2, n3: REPLAYED r0.
   5  scale up to 5: add n5 and n1 again (wiped: a fresh id): replays via
      n5, n1: REPLAYED r0.
   6  scale down to 3: remove n2 and n3; the members n1 n4 n5 all joined
      after the ACCEPT: replays via each: REPLAYED r0.
   7  kill -9 every node, restart them, replay at once via each: never
      ACCEPTED; then (retried until answered) REPLAYED r0.
   8  grow back to 5 (n2 n3 fresh) and claim a new key C-0 via all 5 at
      the same instant with 5 fresh request ids: exactly one ACCEPTED, the
      others REPLAYED naming it (or :info/:fail); and a key C-1 with one
      request id via all 5: at most one ACCEPTED retry=false, no REPLAYED.
   Every replay that expects an answer is retried (same request id) up to
  15 times, 1 s apart, until it is :ok."
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [checker :as checker]
                    [control :as c]
                    [generator :as gen]
                    [independent :as independent]
                    [nemesis :as n]
                    [net :as net]]
            [once.jepsen.client :as oc]
            [once.jepsen.db :as odb]
            [once.jepsen.gens :as g]
            [once.jepsen.nemesis :as on]))

;; ---------------------------------------------------------------------------
;; The nemesis side

(defn- node-id [test node]
  (get-in (:members (on/refresh! test)) [node :id]))

(defn- isolate-leader! [test]
  (when (= :partition (:acceptance-variant test))
    (when-let [ld (on/leader test)]
      (net/drop-all! test (n/complete-grudge [[ld] (remove #{ld} (:nodes test))]))
      ld)))

(defn- heal! [test]
  (when (= :partition (:acceptance-variant test))
    (net/heal! (:net test) test)))

(defn- ensure-removed!
  "After a removal whose answer was not OK (e.g. sent to a leader that was
  cut off): polls the directory for up to 60 s, repeating the removal every
  5 s (retiring an id again is OK), until node is gone. \"OK\" or the last
  answer's outcome."
  [test node id ans]
  (if (= "OK" (:outcome ans))
    "OK"
    (let [deadline (+ (System/currentTimeMillis) 60000)]
      (loop [i 0]
        (let [ms (:members (on/refresh! test))]
          (cond
            (and ms (not (contains? ms node))) "OK"
            (> (System/currentTimeMillis) deadline) (or (:outcome ans) (:error ans))
            :else (do (when (and (pos? i) (zero? (mod i 5)))
                        (on/ctl-members! test ["members" "remove" id] "10s"))
                      (Thread/sleep 1000)
                      (recur (inc i)))))))))

(defn- remove-node!
  "Removes node as the variant says; leaves it running (a zombie) unless
  it was killed first. Returns what happened."
  [test node how]
  (let [id  (node-id test node)
        ld  (on/leader test)]
    (case how
      :leader
      (let [t   (when (not= ld node) (on/ctl-members! test ["members" "transfer" id] "10s"))
            _   (Thread/sleep 2000)
            ans (oc/ctl! test node (map oc/client-addr (cons node (remove #{node} (on/member-nodes test))))
                         ["leave"] "30s")]
        (on/set-state! test node :zombie)
        {:node node :id id :how how :transfer (:outcome t) :outcome (ensure-removed! test node id ans)
         :answer (select-keys ans [:outcome :error :applied :reason :message])})

      :kill-first
      (do (c/on-nodes test [node] (fn [_ _] (odb/kill-onced!)))
          (let [ans (on/ctl-members! test ["members" "remove" id] "30s")]
            (on/set-state! test node :removed)
            {:node node :id id :how how :outcome (ensure-removed! test node id ans)
             :answer (select-keys ans [:outcome :error :applied :reason :message])}))

      ;; :follower, :partition
      (let [t   (when (= ld node) (on/ctl-members! test ["members" "transfer"] "10s"))
            _   (when t (Thread/sleep 2000))
            iso (isolate-leader! test)
            ans (on/ctl-members! test ["members" "remove" id] "30s")]
        (heal! test)
        (on/set-state! test node :zombie)
        {:node node :id id :how how :isolated iso :outcome (ensure-removed! test node id ans)
         :answer (select-keys ans [:outcome :error :applied :reason :message])}))))

(defn- add-node! [test node]
  (let [iso    (isolate-leader! test)
        r      (on/grow! test node)
        _      (heal! test)
        ;; with the leader cut off the join may finish only after the heal
        voter? (or (:voter? r) (and iso (odb/await-voter test node (on/member-nodes test) 60)))]
    (assoc r :isolated iso :voter? voter? :outcome (if voter? "OK" "NOT_VOTER"))))

(defrecord AcceptanceNemesis []
  n/Reflection
  (fs [this] #{:acc-remove :acc-wipe :acc-add :acc-snapshot :acc-kill-all :acc-start-all})
  n/Nemesis
  (setup! [this test] this)
  (invoke! [this test {:keys [f value] :as op}]
    (assoc op :type :info
           :value
           (try
             (case f
               :acc-remove   (remove-node! test (:node value) (or (:how value) (:acceptance-variant test)))
               :acc-wipe     (do (on/stop-and-wipe! test (:node value)) {:node (:node value) :outcome "OK"})
               :acc-add      (add-node! test (:node value))
               :acc-snapshot (let [ans (on/ctl-members! test ["snapshot" "take"] "30s")]
                               (select-keys ans [:outcome :index :size-bytes :error :message]))
               :acc-kill-all (do (c/on-nodes test (on/member-nodes test) (fn [_ _] (odb/kill-onced!)))
                                 {:killed (vec (on/member-nodes test)) :outcome "OK"})
               :acc-start-all (do (c/on-nodes test (on/member-nodes test)
                                              (fn [t nd] (odb/start-onced! t nd {})))
                                  {:started (vec (on/member-nodes test)) :outcome "OK"}))
             (catch Exception e
               (warn e "acceptance step" f)
               {:outcome "ERROR" :error (str (class e) ": " (.getMessage e))}))))
  (teardown! [this test]))

(defn package [opts]
  {:generator nil :final-generator nil :nemesis (AcceptanceNemesis.) :perf #{}})

;; ---------------------------------------------------------------------------
;; The client side

(defn- thread-of [test node] (.indexOf ^java.util.List (vec (:nodes test)) node))

(defn- claim-op [scope k rid step]
  {:f :claim :value (independent/tuple k {:scope scope :request-id rid :kind "NONCE" :step step})})

(defn- via
  "One claim through node (its thread); retried with the same request id
  until :ok when retry? (up to 15 calls, 1 s apart)."
  [test node op retry?]
  (gen/on-threads #{(thread-of test node)}
                  (if retry?
                    (gen/until-ok (gen/limit 15 (gen/delay 1 (gen/repeat op))))
                    (gen/once op))))

(defn- replays
  "Fresh-request-id replays of k through each node, at the same time."
  [test scope k nodes step retry?]
  (gen/clients
    (apply gen/any (for [nd nodes] (via test nd (claim-op scope k (g/fresh-rid) step) retry?)))))

(defn- nem [f value] (gen/nemesis {:type :info :f f :value value}))

(defn workload
  [test]
  (let [[n1 n2 n3 n4 n5] (:nodes test)
        scope (g/fresh-scope "jepsen-acceptance")
        k     "N-0"
        r0    (g/fresh-rid)
        keys  (atom #{k "C-0" "C-1"})
        how   (:acceptance-variant test :follower)]
    (assert (<= 5 (count (:nodes test))) "the acceptance sequence needs 5 nodes")
    {:scope scope
     :keys  keys
     :r0    r0
     :generator
     (gen/phases
       (gen/clients (via test n1 (claim-op scope k r0 :1-accept) true))
       (replays test scope k [n2 n3] :2-replay true)
       (nem :acc-remove {:node n1 :how how})
       (if (= :kill-first how)
         []
         (replays test scope k [n1] :3-zombie false))
       (replays test scope k [n2 n3] :3-replay true)
       (nem :acc-wipe {:node n1})
       (gen/clients (gen/on-threads #{(thread-of test n2) (thread-of test n3)}
                                    (for [i (range 80)]
                                      (let [fk (str "F-" i)]
                                        (swap! keys conj fk)
                                        (claim-op scope fk (g/fresh-rid) :4-filler)))))
       (nem :acc-snapshot nil)
       (nem :acc-add {:node n4})
       (replays test scope k [n4 n2 n3] :4-replay true)
       (nem :acc-add {:node n5})
       (nem :acc-add {:node n1})
       (replays test scope k [n5 n1] :5-replay true)
       (nem :acc-remove {:node n2 :how :follower})
       (nem :acc-wipe {:node n2})
       (nem :acc-remove {:node n3 :how :follower})
       (nem :acc-wipe {:node n3})
       (replays test scope k [n1 n4 n5] :6-replay true)
       (nem :acc-kill-all nil)
       (nem :acc-start-all nil)
       (replays test scope k [n1 n4 n5] :7-immediate false)
       (replays test scope k [n1 n4 n5] :7-replay true)
       (nem :acc-add {:node n2})
       (nem :acc-add {:node n3})
       (gen/clients (gen/synchronize
                      (apply gen/any (for [nd [n1 n2 n3 n4 n5]]
                                       (via test nd (claim-op scope "C-0" (g/fresh-rid) :8-distinct) false)))))
       (let [rid (g/fresh-rid)]
         (gen/clients (gen/synchronize
                        (apply gen/any (for [nd [n1 n2 n3 n4 n5]]
                                         (via test nd (claim-op scope "C-1" rid :8-same-rid) false)))))))
     :final-generator
     (fn [members-fn]
       (g/final-probes test keys members-fn (fn [_k] {:scope scope :kind "NONCE"})))}))

;; ---------------------------------------------------------------------------
;; The checker

(defn- step-ops [history step]
  (filter #(and (integer? (:process %)) (not= :invoke (:type %))
                (= step (:step (let [v (:value %)] (if (independent/tuple? v) (val v) v)))))
          history))

(defn- v-of [op] (let [v (:value op)] (if (independent/tuple? v) (val v) v)))

(defn check-steps
  "Problems with the steps' expected outcomes (a vector of strings) for a
  history, the first request id r0 and the nodes."
  [history r0 nodes]
  (let [ok       (fn [ops] (filter #(= :ok (:type %)) ops))
        outcome  (fn [op] (some-> (:outcome (v-of op)) name str/upper-case))
        accepted (fn [ops] (filter #(= "ACCEPTED" (outcome %)) (ok ops)))
        problems (transient [])
        bad!     (fn [& xs] (conj! problems (apply str xs)))
        [n1 n2 n3 n4 n5] nodes
        expect-replays
        (fn [step via]
          (let [ops (step-ops history step)]
            (doseq [o (ok ops) :when (not (and (= "REPLAYED" (outcome o))
                                               (= r0 (:first-request-id (v-of o)))))]
              (bad! step ": " (outcome o) " (first " (:first-request-id (v-of o)) ") via "
                    (:node (v-of o)) ", expected REPLAYED first " r0))
            (doseq [nd via
                    :let [addr (oc/client-addr nd)]
                    :when (not-any? #(= addr (:node (v-of %))) (ok ops))]
              (bad! step ": no answer via " nd " (" addr ") after 15 tries"))))]
    ;; 1
    (let [ops (step-ops history :1-accept)]
      (when-not (seq (accepted ops)) (bad! "1-accept: R was not ACCEPTED via " n1))
      (doseq [o (ok ops) :when (not= "ACCEPTED" (outcome o))]
        (bad! "1-accept: " (outcome o) " for the first use of R")))
    (expect-replays :2-replay [n2 n3])
    (doseq [step [:3-zombie :7-immediate]
            o (accepted (step-ops history step))]
      (bad! (name step) ": ACCEPTED via " (:node (v-of o)) " (must be denied or unavailable)"))
    (expect-replays :3-replay [n2 n3])
    (expect-replays :4-replay [n4 n2 n3])
    (expect-replays :5-replay [n5 n1])
    (expect-replays :6-replay [n1 n4 n5])
    (expect-replays :7-replay [n1 n4 n5])
    (let [ops (step-ops history :8-distinct)
          as  (accepted ops)]
      (when (< 1 (count as)) (bad! "8-distinct: " (count as) " ACCEPTED"))
      (when-let [w (:request-id (v-of (first as)))]
        (doseq [o (ok ops) :when (and (= "REPLAYED" (outcome o)) (not= w (:first-request-id (v-of o))))]
          (bad! "8-distinct: REPLAYED names " (:first-request-id (v-of o)) ", the ACCEPTED was " w))))
    (let [ops (step-ops history :8-same-rid)]
      (when (< 1 (count (remove #(:retry (v-of %)) (accepted ops))))
        (bad! "8-same-rid: more than one ACCEPTED retry=false for one request id"))
      (doseq [o (ok ops) :when (= "REPLAYED" (outcome o))]
        (bad! "8-same-rid: REPLAYED for a call sharing the accepted request id")))
    ;; the membership steps themselves
    (doseq [o history
            :when (and (= :nemesis (:process o)) (= :info (:type o))
                       (#{:acc-remove :acc-add :acc-snapshot :acc-wipe :acc-kill-all :acc-start-all} (:f o))
                       (map? (:value o)) (contains? (:value o) :outcome))
            :when (not= "OK" (:outcome (:value o)))]
      (bad! (name (:f o)) " " (pr-str (:value o))))
    (persistent! problems)))

(defn checker
  "Valid iff every step had its expected outcome."
  [r0]
  (reify checker/Checker
    (check [this test history opts]
      (let [ps (check-steps (seq history) r0 (:nodes test))]
        {:valid? (empty? ps) :r0 r0 :problems ps}))))
