;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.nemesis
  "Faults for once: Jepsen's combined packages (partitions, kill, pause,
  packet loss, clocks) with our partition specs added, and a membership
  package (grow, shrink, replace with a fresh id, remove-leader, resize 3<->5,
  transfer, zombie, re-adding a retired id, which must be refused), plus the
  status sampler (R8-R10) and the :final-phase event (R7).

  Membership follows jepsen.nemesis.membership's principles: one change at
  a time (the nemesis is one thread); never below 3 voters; a removed node's
  data is wiped only after its removal committed (it is then a spare, and
  joins again only with a wiped directory: a fresh random id); membership is
  re-read from `members list` before every change, so an indeterminate
  change (oncectl exit 4, applied unknown) is resolved by observation.
  Every membership op is an :info op of the nemesis with what happened in
  its :value."
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [control :as c]
                    [db :as db]
                    [generator :as gen]
                    [nemesis :as n]
                    [net :as net]
                    [random :as rand]
                    [store :as store]
                    [util :as util]]
            [jepsen.nemesis.combined :as nc]
            [once.jepsen.client :as oc]
            [once.jepsen.db :as odb]))

;; ---------------------------------------------------------------------------
;; Membership state (an atom in the test: :membership)

(defn initial-state
  "{:nodes {node {:state :member|:spare|:removed|:zombie}} :retired [...]}"
  [test]
  (let [init (set (odb/initial-members test))]
    {:nodes   (into {} (for [n (:nodes test)] [n {:state (if (init n) :member :spare)}]))
     :retired []}))

(defn state-of [test node] (get-in @(:membership test) [:nodes node :state]))

(defn set-state! [test node st & {:as extra}]
  (swap! (:membership test) update-in [:nodes node] merge (assoc extra :state st)))

(defn- addr->node [test addr]
  (first (filter #(= addr (oc/client-addr %)) (:nodes test))))

(defn member-nodes
  "Nodes the state says are members (what clients and probes should use)."
  [test]
  (filter #(= :member (state-of test %)) (:nodes test)))

(defn refresh!
  "Re-reads the directory from the leader through the members; returns
  {:voters [node] :members {node member-map}}. Every listed node becomes a
  member and every unlisted member :removed (a change whose answer was lost
  may have committed either way); zombies stay zombies."
  [test]
  (let [ms (oc/members test (distinct (concat (member-nodes test) (:nodes test))))]
    (when ms
      (let [by-node (into {} (for [m ms :let [nd (addr->node test (:client-addr m))] :when nd] [nd m]))]
        (doseq [nd (:nodes test)
                :let [st (state-of test nd)]
                :when (not= :zombie st)]
          (cond (contains? by-node nd) (set-state! test nd :member)
                (= :member st)         (set-state! test nd :removed)))
        {:voters  (vec (for [[nd m] by-node :when (= "voter" (str/lower-case (str (:role m))))] nd))
         :members by-node}))))

(defn leader
  "The node that reports itself LEADER, among the members, or nil."
  [test]
  (first (filter #(= "LEADER" (some-> (oc/status test %) :role str/upper-case))
                 (member-nodes test))))

(defn ctl-members! [test args timeout]
  (let [via (member-nodes test)]
    (oc/ctl! test (first via) (map oc/client-addr via) args timeout)))

(defn stop-and-wipe!
  "Kills onced on node (by PID) and wipes its data: a spare. Only after its
  removal committed."
  [test node]
  (c/on-nodes test [node] (fn [_ _] (odb/kill-onced!) (odb/wipe!)))
  (set-state! test node :spare))

(defn grow!
  "A fresh member on node: kill, wipe (a new random id), start with --join
  through the members, wait until it is a voter."
  [test node]
  (let [via (member-nodes test)]
    (c/on-nodes test [node] (fn [t _]
                              (odb/kill-onced!)
                              (odb/wipe!)
                              (odb/start-onced! t node {:join (map oc/client-addr via)})))
    (set-state! test node :member)
    (let [ok? (odb/await-voter test node via 60)
          id  (:node-id (oc/status test node))]
      {:node node :id id :voter? ok?})))

(defn remove!
  "members remove of node's id through the members; the answer. With
  leader? true it is `leave` through the node itself (transfer first)."
  [test node id]
  (let [ans (ctl-members! test ["members" "remove" id] "30s")]
    (when (= "OK" (:outcome ans))
      (swap! (:membership test) update :retired conj
             {:id id :node node :raft-addr (oc/raft-addr node) :client-addr (oc/client-addr node)}))
    ans))

(defn- summary [ans] (select-keys ans [:outcome :error :applied :reason :message :exit]))

(defn shrink!
  "Removes node (not below 3 voters), then stops and wipes it once the
  removal is OK. keep? true leaves it running (a zombie)."
  [test node {:keys [keep?]}]
  (let [{:keys [members]} (refresh! test)
        id  (get-in members [node :id])]
    (if-not id
      {:node node :skipped "not in the directory"}
      (let [ans (remove! test node id)]
        (cond
          (not= "OK" (:outcome ans)) {:node node :id id :answer (summary ans)}
          keep? (do (set-state! test node :zombie) {:node node :id id :answer (summary ans) :zombie true})
          :else (do (stop-and-wipe! test node) {:node node :id id :answer (summary ans)}))))))

(defn- spares [test] (filter #(#{:spare :removed} (state-of test %)) (:nodes test)))

(defn- pick [xs] (when (seq xs) (rand/nth (vec xs))))

(defn member-op!
  "Performs one membership op; returns its :value."
  [test {:keys [f value]}]
  (let [{:keys [voters]} (or (refresh! test) {:voters []})
        nv      (count voters)
        ld      (leader test)
        follower (pick (remove #{ld} voters))]
    (case f
      :member-grow
      (if-let [s (pick (spares test))] (grow! test s) {:skipped "no spare host"})

      :member-shrink
      (if (and (< 3 nv) follower) (shrink! test follower {}) {:skipped (str nv " voters")})

      :member-replace
      ;; a fresh id: add a spare first when there is one, else remove then
      ;; re-add the same host with a wiped directory
      (if-let [old follower]
        (if-let [s (pick (spares test))]
          (let [g (grow! test s)] {:added g :removed (shrink! test old {})})
          (let [r (shrink! test old {})]
            ;; re-add only once the removal is OK (the host is then a wiped spare)
            {:removed r :added (when (= :spare (state-of test old)) (grow! test old))}))
        {:skipped "no follower"})

      :member-remove-leader
      (cond
        (not ld) {:skipped "no leader"}
        (and (<= nv 3) (empty? (spares test))) {:skipped (str nv " voters and no spare")}
        :else
        (let [g   (when (<= nv 3) (when-let [s (pick (spares test))] (grow! test s)))
              id  (:node-id (oc/status test ld))
              ;; leave through the leader itself, the others after it: it
              ;; transfers leadership away, then the new leader removes it
              ans (oc/ctl! test ld (map oc/client-addr (cons ld (remove #{ld} (member-nodes test))))
                           ["leave"] "30s")]
          (when (= "OK" (:outcome ans))
            (swap! (:membership test) update :retired conj
                   {:id id :node ld :raft-addr (oc/raft-addr ld) :client-addr (oc/client-addr ld)})
            (stop-and-wipe! test ld))
          {:node ld :id id :added g :answer (summary ans)}))

      :member-resize
      (if (<= nv 3)
        {:to 5 :grown (vec (for [s (take (- 5 nv) (spares test))] (grow! test s)))}
        {:to 3 :shrunk (vec (for [nd (take (- nv 3) (rand/shuffle (remove #{ld} voters)))]
                              (shrink! test nd {})))})

      :member-transfer
      {:answer (summary (ctl-members! test ["transfer"] "10s")) :from ld}

      :member-zombie
      ;; cut one follower off, remove it through the majority, keep it running
      ;; with its clients still talking to it, then heal and retire it
      (if-not (and follower (< 3 nv))
        {:skipped (str nv " voters")}
        (let [others (remove #{follower} (:nodes test))]
          (net/drop-all! test (n/complete-grudge [[follower] others]))
          (let [r (shrink! test follower {:keep? true})]
            (Thread/sleep (long (* 1000 (+ 5 (rand/long 6)))))
            (net/heal! (:net test) test)
            (Thread/sleep 3000)
            (when (:zombie r) (stop-and-wipe! test follower))
            (assoc r :zombie-seconds "5-10"))))

      :member-reuse-id
      ;; negative test: a retired id must be refused for ever
      (if-let [{:keys [id raft-addr client-addr node]} (pick (:retired @(:membership test)))]
        (let [ans (ctl-members! test ["members" "add" id raft-addr client-addr] "30s")]
          ;; refused: FAILED_PRECONDITION; accepted: OK (a bug); anything
          ;; else (unavailable, unknown) decides nothing
          {:id id :node node :answer (summary ans)
           :refused? (case (:outcome ans) "FAILED_PRECONDITION" true "OK" false nil)})
        {:skipped "no retired id yet"})

      :member-restore
      (let [target (:final-members test (count (odb/initial-members test)))]
        (doseq [nd (:nodes test) :when (= :zombie (state-of test nd))]
          (stop-and-wipe! test nd))
        {:grown (vec (for [s (take (max 0 (- target nv)) (spares test))] (grow! test s)))})

      :final-phase
      (let [{:keys [voters]} (refresh! test)]
        {:members (mapv oc/client-addr voters)}))))

(defrecord MemberNemesis []
  n/Reflection
  (fs [this] #{:member-grow :member-shrink :member-replace :member-remove-leader :member-resize
               :member-transfer :member-zombie :member-reuse-id :member-restore :final-phase})
  n/Nemesis
  (setup! [this test] this)
  (invoke! [this test op]
    (assoc op :type :info
           :value (try (member-op! test op)
                       (catch Exception e
                         (warn e "membership op" (:f op))
                         {:error (str (class e) ": " (.getMessage e))}))))
  (teardown! [this test]))

(def member-fs
  [:member-grow :member-shrink :member-replace :member-remove-leader :member-resize
   :member-transfer :member-zombie :member-reuse-id])

(defn member-package
  "Membership changes every --interval seconds (weighted towards
  replace/grow/shrink), the final :member-restore, and the :final-phase."
  [opts]
  (let [needed? (contains? (:faults opts) :member)
        gen     (->> (fn [] {:type :info
                             :f (rand/nth [:member-grow :member-shrink :member-replace :member-replace
                                           :member-remove-leader :member-resize :member-transfer
                                           :member-zombie :member-reuse-id])})
                     (gen/stagger (:interval opts 10)))]
    {:generator       (when needed? gen)
     :final-generator (when needed? {:type :info :f :member-restore})
     :nemesis         (MemberNemesis.)
     :perf            #{{:name "member" :fs (set member-fs) :start #{} :stop #{} :color "#C5A0E9"}}}))

;; ---------------------------------------------------------------------------
;; Partitions: Jepsen's specs plus bridge and one-way

(defn- one-way-grudge
  "One side of a random split drops what the other sends; the other side
  still hears it."
  [nodes]
  (let [[a b] (n/bisect (rand/shuffle nodes))]
    (into {} (for [x a] [x (set b)]))))

(defn partition-nemesis
  "Jepsen's partition nemesis (nc/partition-nemesis) with two more specs:
  :bridge and :one-way, turned into grudges here."
  ([db] (partition-nemesis db (nc/partition-nemesis db)))
  ([db inner]
   (reify
     n/Reflection
     (fs [this] [:start-partition :stop-partition])
     n/Nemesis
     (setup! [this test] (partition-nemesis db (n/setup! inner test)))
     (invoke! [this test op]
       (let [spec (:value op)
             v    (case spec
                    :bridge  (n/bridge (rand/shuffle (:nodes test)))
                    :one-way (one-way-grudge (:nodes test))
                    spec)]
         (assoc (n/invoke! inner test (assoc op :value v)) :spec spec)))
     (teardown! [this test] (n/teardown! inner test)))))

(def partition-targets
  [:one :majority :majorities-ring :minority-third :primaries :bridge :one-way])

(defn partition-package [opts]
  (let [needed? (contains? (:faults opts) :partition)
        start   (fn [] {:type :info :f :start-partition :value (rand/nth partition-targets)})
        stop    {:type :info :f :stop-partition :value nil}]
    {:generator       (when needed?
                        (->> (gen/flip-flop start (gen/repeat stop))
                             (gen/stagger (:interval opts 10))))
     :final-generator (when needed? stop)
     :nemesis         (partition-nemesis (:db opts))
     :perf            #{{:name "partition" :start #{:start-partition} :stop #{:stop-partition}
                         :color "#E9DCA0"}}}))

;; ---------------------------------------------------------------------------
;; Status sampler: status.edn in the store directory, the shape
;; jepsen/local/run writes (R8-R10 read it; jepsen/local/check --samples too)

(defn- sample-loop [test running out]
  (let [sessions (atom {})]
    (try
      (while @running
        (let [t0 (System/currentTimeMillis)]
          (doseq [node (:nodes test)
                  :when (#{:member :zombie} (state-of test node))]
            (try
              (let [s   (or (@sessions node) ((swap! sessions assoc node (oc/open-session test node)) node))
                    ans (oc/call! s {"cmd" "status" "node" (oc/client-addr node) "state_digest" true "timeout" "500ms"} 3000)]
                (when (and (:outcome ans) (not (:error ans)))
                  (let [t (util/relative-time-nanos)
                        v (assoc ans :node (oc/client-addr node))]
                    (locking out
                      (.write ^java.io.Writer out
                              (str (pr-str {:type :info :process :status :f :status :time t :value v}) "\n"))
                      (when (and (:applied-index ans) (:applied-digest ans))
                        (.write ^java.io.Writer out
                                (str (pr-str {:type :info :process :checker :f :dump :time t
                                              :value (cond-> {:node (oc/client-addr node)
                                                              :applied-index (:applied-index ans)
                                                              :digest (:applied-digest ans)}
                                                       (:state-digest ans)
                                                       (assoc :state-digest (:state-digest ans)))})
                                     "\n")))
                      (.flush ^java.io.Writer out)))))
              (catch Exception _
                (some-> (@sessions node) oc/kill-session!)
                (swap! sessions dissoc node))))
          (Thread/sleep (max 50 (- 500 (- (System/currentTimeMillis) t0))))))
      (finally
        (doseq [[_ s] @sessions] (oc/close-session! s))))))

(defrecord Sampler [running fut out]
  n/Reflection
  (fs [this] #{})
  n/Nemesis
  (setup! [this test]
    (let [running (atom true)
          out     (java.io.FileWriter. (store/path! test "status.edn") true)]
      (assoc this :running running :out out
             :fut (future (sample-loop test running out)))))
  (invoke! [this test op] op)
  (teardown! [this test]
    (when running
      (reset! running false)
      (deref fut 10000 nil)
      (.close ^java.io.Writer out))))

;; ---------------------------------------------------------------------------
;; The whole package

(defn package
  "The composed nemesis package for --nemesis faults: partition, kill,
  pause, packet, clock, member. Always includes the sampler and the
  membership nemesis (which answers :final-phase)."
  [opts]
  (let [faults (:faults opts)
        ;; final generators run in this order: heal, resume/start, packets,
        ;; clocks, then membership restore (which needs the others healed)
        pkgs   (cond-> [(partition-package opts)]
                 (some #{:kill :pause} faults)
                 (conj (nc/db-package (assoc opts
                                             :kill  {:targets [:one :primaries :majority :all]}
                                             :pause {:targets [:one :primaries :majority]})))
                 (faults :packet)
                 (conj (nc/packet-package (assoc opts :packet {:targets [:one :minority-third :majority]
                                                               :behaviors [{:loss {:percent :20%}}
                                                                           {:delay {}}]})))
                 (faults :clock)
                 (conj (nc/clock-package (assoc opts :clock {:targets [:one :minority-third]})))
                 true
                 (conj (member-package opts)))
        pkg    (nc/compose-packages (concat pkgs (:extra-packages opts)))]
    (assoc pkg :nemesis (n/compose [(:nemesis pkg) (->Sampler nil nil nil)]))))
