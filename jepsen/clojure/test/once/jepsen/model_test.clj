(ns once.jepsen.model-test
  "The write-once models that once.jepsen.checker gives Knossos, against
  the rules of once.jepsen.rules, by brute force on random small histories
  (what Knossos does, done exhaustively here because Knossos is not
  available without Clojars): on NONCE keys the rules R1-R4 must agree
  exactly with linearizability under the model; on IDEMPOTENT keys the
  rules must never flag a linearizable key. Seeded: ONCE_MODEL_SEED,
  ONCE_MODEL_N (default 2000 per test)."
  (:require [clojure.test :refer [deftest is testing]]
            [once.jepsen.model :as m]
            [once.jepsen.rules :as r]))

(def n-histories
  (Long/parseLong (or (System/getenv "ONCE_MODEL_N") "2000")))

(def seed (Long/parseLong (or (System/getenv "ONCE_MODEL_SEED") "1")))

;; ---------------------------------------------------------------------------
;; Brute force: Knossos's semantics (:ok inside its interval, :info any time
;; after its invocation or never, :fail never), exhaustively.

(defn linearizable?
  "Is one key's calls linearizable under the model? nil when too large."
  [calls]
  (let [wl     (r/workload calls)
        ops    (vec (for [c calls
                          :let [role (case (:type c)
                                       "fail" nil
                                       "info" :opt
                                       "ok"   (when (m/modeled? (:f c) wl (:outcome c)) :req))]
                          :when role]
                      [c (= :req role) (m/call-input c)]))
        n      (count ops)
        tokens (m/rid-tokens (map #(nth % 2) (filter second ops)))
        req    (reduce (fn [mask i] (if (second (ops i)) (bit-or mask (bit-shift-left 1 i)) mask))
                       0 (range n))
        seen   (atom #{})]
    (when (<= n 12)
      (letfn [(dfs [done states]
                (cond
                  (= req (bit-and done req)) true
                  (@seen [done states]) false
                  :else
                  (do (swap! seen conj [done states])
                      (let [min-ret (apply min (for [i (range n)
                                                     :when (and (bit-test req i) (not (bit-test done i)))]
                                                 (:ret (first (ops i)))))]
                        (boolean
                          (some (fn [i]
                                  (let [[c _ in] (ops i)]
                                    (when (and (not (bit-test done i)) (< (:inv c) min-ret))
                                      (let [ns (m/step-set wl states in tokens)]
                                        (and (seq ns) (dfs (bit-set done i) ns))))))
                                (range n)))))))]
        (dfs 0 (m/initial wl))))))

;; ---------------------------------------------------------------------------
;; Random histories (times are doubles; :info calls end at INF or with an
;; :info completion)

(defn history-of
  "Op maps in real-time order from call specs {:p :f :inv :ret :type :args
  :res}."
  [specs]
  (->> specs
       (mapcat (fn [{:keys [p f inv ret type args res]}]
                 (cond-> [[inv {:type :invoke :process p :f f :value args}]]
                   (not= ##Inf ret) (conj [ret {:type type :process p :f f :value res}]))))
       (sort-by first)
       (map-indexed (fn [i [_ o]] (assoc o :index i)))
       vec))

(defn spec [^java.util.Random rng p key rid inv ret type res args]
  {:p p :f (:f args "claim") :inv inv
   :ret (if (and (= :info type) (.nextBoolean rng)) ##Inf ret)
   :type type
   :args (merge {:scope "s" :key key :request-id rid :kind "NONCE"} (dissoc args :f))
   :res res})

(defn pick [^java.util.Random rng xs] (nth xs (.nextInt rng (count xs))))

(defn weighted [^java.util.Random rng & kvs]
  (let [pairs (partition 2 kvs)
        x     (* (.nextDouble rng) (reduce + (map second pairs)))]
    (loop [[[k w] & more] pairs, acc 0.0]
      (if (or (nil? more) (< x (+ acc w))) k (recur more (+ acc w))))))

(defn nonce-random [^java.util.Random rng]
  (loop [n (inc (.nextInt rng 7)), i 0, rids [], specs []]
    (if (= i n)
      specs
      (let [rid  (if (and (seq rids) (< (.nextDouble rng) 0.3)) (pick rng rids) (str "r" i))
            rids (if (some #{rid} rids) rids (conj rids rid))
            inv  (* 20 (.nextDouble rng))
            ret  (+ inv 0.5 (* 8 (.nextDouble rng)))
            type (weighted rng :ok 60 :fail 15 :info 25)
            x    (.nextDouble rng)
            res  (case type
                   :ok   (cond (< x 0.4) {:outcome "ACCEPTED" :retry (< (.nextDouble rng) 0.3)
                                          :first-request-id (if (< (.nextDouble rng) 0.9) rid
                                                              (pick rng (conj rids "zz")))}
                           (< x 0.95) {:outcome "REPLAYED" :retry false
                                       :first-request-id (pick rng (conj rids "zz" rid))}
                           :else {:outcome "STALE"})
                   :fail {:error "UNAVAILABLE" :applied "false"}
                   :info {:error "DEADLINE_EXCEEDED" :applied "unknown"})]
        (recur n (inc i) rids (conj specs (spec rng i "k" rid inv ret type res {})))))))

(defn nonce-system
  "A correct cluster's answers in a random linearization order, then maybe
  one answer changed."
  [^java.util.Random rng perturb?]
  (let [n     (inc (.nextInt rng 7))
        calls (loop [i 0, rids [], out []]
                (if (= i n)
                  out
                  (let [rid (if (and (seq rids) (< (.nextDouble rng) 0.3)) (pick rng rids) (str "r" i))
                        inv (* 20 (.nextDouble rng))
                        ret (+ inv 0.5 (* 8 (.nextDouble rng)))]
                    (recur (inc i) (if (some #{rid} rids) rids (conj rids rid))
                           (conj out {:i i :rid rid :inv inv :ret ret
                                      :at (+ inv (* (- ret inv) (.nextDouble rng)))})))))
        rids  (vec (distinct (map :rid calls)))
        [calls _] (reduce (fn [[out owner] c]
                            (let [type    (weighted rng :ok 70 :fail 10 :info 20)
                                  applied (or (= :ok type) (and (= :info type) (.nextBoolean rng)))
                                  [res owner] (cond
                                                (not applied) [nil owner]
                                                (nil? owner) [{:outcome "ACCEPTED" :retry false
                                                               :first-request-id (:rid c)} (:rid c)]
                                                (= owner (:rid c)) [{:outcome "ACCEPTED" :retry true
                                                                     :first-request-id owner} owner]
                                                :else [{:outcome "REPLAYED" :retry false
                                                        :first-request-id owner} owner])
                                  res (case type
                                        :ok res
                                        :fail {:error "UNAVAILABLE" :applied "false"}
                                        :info {:error "DEADLINE_EXCEEDED" :applied "unknown"})]
                              [(conj out (assoc c :type type :res res)) owner]))
                          [[] nil] (sort-by :at calls))
        calls (if-let [oks (and perturb? (seq (filter #(= :ok (:type %)) calls)))]
                (let [c   (pick rng (vec oks))
                      mod (.nextInt rng 4)
                      c'  (case mod
                            0 (update-in c [:res :outcome] #(if (= "ACCEPTED" %) "REPLAYED" "ACCEPTED"))
                            1 (assoc-in c [:res :first-request-id] (pick rng (conj rids "zz")))
                            2 (update-in c [:res :retry] not)
                            3 (assoc c :type :fail :res {:error "UNAVAILABLE" :applied "false"}))]
                  (mapv #(if (= (:i %) (:i c)) c' %) calls))
                calls)]
    (for [c calls] (spec rng (:i c) "k" (:rid c) (:inv c) (:ret c) (:type c) (:res c) {}))))

(defn idem-random
  "Arbitrary IDEMPOTENT calls on one key: claims, completes, releases with
  tokens from a small pool."
  [^java.util.Random rng]
  (let [toks ["1:10:0" "1:11:0" "1:12:0"]]
    (for [i (range (inc (.nextInt rng 6)))]
      (let [f    (weighted rng "claim" 55 "complete" 35 "release" 10)
            rid  (str "r" (.nextInt rng 4))
            inv  (* 20 (.nextDouble rng))
            ret  (+ inv 0.5 (* 8 (.nextDouble rng)))
            type (weighted rng :ok 70 :fail 10 :info 20)
            tok  (pick rng toks)
            res  (case type
                   :fail {:error "UNAVAILABLE" :applied "false"}
                   :info {:error "DEADLINE_EXCEEDED" :applied "unknown"}
                   :ok (case f
                         "claim" (let [o (weighted rng "ACCEPTED" 50 "IN_PROGRESS" 25 "DUPLICATE" 20 "FAILED" 5)]
                                   (cond-> {:outcome o :retry (< (.nextDouble rng) 0.2)
                                            :first-request-id (str "r" (.nextInt rng 4))}
                                     (= "ACCEPTED" o) (assoc :owner-token tok
                                                             :owner-attempt (inc (.nextInt rng 3)))
                                     (= "DUPLICATE" o) (assoc :result-b64 (pick rng ["eA==" "eQ=="]))))
                         "complete" (let [o (weighted rng "COMPLETED" 60 "NOT_OWNER" 25 "NOT_FOUND" 15)]
                                      (cond-> {:outcome o :retry (< (.nextDouble rng) 0.2)}
                                        (= "COMPLETED" o) (assoc :result-b64 (pick rng ["eA==" "eQ=="]))))
                         "release" {:outcome (weighted rng "RELEASED" 60 "NOT_OWNER" 40)
                                    :retry false}))
            args (case f
                   "claim" {:f f :kind "IDEMPOTENT"}
                   "complete" {:f f :kind nil :owner-token tok :result-b64 (pick rng ["eA==" "eQ=="])}
                   "release" {:f f :kind nil :owner-token tok})]
        (spec rng i "o" rid inv ret type res args)))))

(defn rules-valid? [history]
  (let [{:keys [calls events]} (r/pair (r/ops history))
        res (r/check-calls calls events)]
    ;; only the per-key rules R1-R6 (no events in these histories)
    (not-any? #(and (:fatal? %) (#{"R1" "R2" "R3" "R4" "R5"} (:rule %))) (:anomalies res))))

(defn lin-valid? [history]
  (let [{:keys [calls]} (r/pair (r/ops history))]
    (linearizable? calls)))

(deftest nonce-rules-are-linearizability
  (let [rng (java.util.Random. seed)
        counts (atom {:agree 0 :invalid 0})]
    (doseq [i (range n-histories)]
      (let [h    (history-of (case (mod i 3)
                               0 (nonce-random rng)
                               1 (nonce-system rng false)
                               2 (nonce-system rng true)))
            rv   (rules-valid? h)
            lv   (lin-valid? h)]
        (when (some? lv)
          (swap! counts update :agree inc)
          (when-not lv (swap! counts update :invalid inc))
          (is (= lv rv) (str "rules " rv ", brute force " lv " on\n"
                             (clojure.string/join "\n" (map pr-str h)))))))
    (println "nonce cross-check:" @counts "(seed" seed ")")
    (is (< 100 (:invalid @counts)) "the generators must produce invalid histories too")))

(deftest nonce-system-histories-are-valid
  (let [rng (java.util.Random. (inc seed))]
    (doseq [_ (range (quot n-histories 4))]
      (let [h (history-of (nonce-system rng false))]
        (is (true? (lin-valid? h)) (str "unperturbed history not linearizable:\n"
                                         (clojure.string/join "\n" (map pr-str h))))))))

(deftest idempotent-rules-never-false-alarm
  (let [rng (java.util.Random. (+ 2 seed))
        counts (atom {:lin 0 :not-lin 0 :caught 0})]
    (doseq [_ (range n-histories)]
      (let [h  (history-of (idem-random rng))
            lv (lin-valid? h)
            rv (rules-valid? h)]
        (when (some? lv)
          (swap! counts update (if lv :lin :not-lin) inc)
          (when (and (not lv) (not rv)) (swap! counts update :caught inc))
          (when lv
            (is rv (str "rules flag a linearizable history:\n"
                        (clojure.string/join "\n" (map pr-str h))))))))
    (println "idempotent soundness:" @counts "(seed" (+ 2 seed) ")")
    (is (pos? (:lin @counts)))))

(deftest knossos-inputs
  (testing "an :ok completion's value (invocation fields merged) steps like the call"
    (let [v {:scope "s" :key "k" :request-id "a" :outcome "ACCEPTED" :retry false
             :first-request-id "a" :node "10.0.0.1:7101"}]
      (is (= #{"a"} (m/step-set "nonce" #{nil} (m/input :claim v) {})))
      (is (= #{} (m/step-set "nonce" #{"b"} (m/input :claim v) {})))))
  (testing "an :info call's invocation value may take effect"
    (is (= #{"a"} (m/step-set "nonce" #{nil} (m/input :claim {:request-id "a"}) {})))
    (is (= #{} (m/step-set "nonce" #{"b"} (m/input :claim {:request-id "a"}) {}))))
  (testing "complete: the sent result is :arg-result-b64, the stored one :result-b64"
    (let [s0 (first (m/step-set "idempotent" #{m/absent}
                                (m/input :claim {:request-id "a" :outcome "ACCEPTED" :retry false
                                                 :owner-token "1:5:0" :owner-attempt 1
                                                 :first-request-id "a"})
                                {}))
          in (m/input :complete {:request-id "c" :owner-token "1:5:0" :outcome "COMPLETED"
                                 :retry false :result-b64 "eA==" :arg-result-b64 "eA=="})
          bad (m/input :complete {:request-id "c" :owner-token "1:5:0" :outcome "COMPLETED"
                                  :retry false :result-b64 "eQ==" :arg-result-b64 "eA=="})]
      (is (= "PENDING" (first s0)))
      (is (= "COMPLETED" (ffirst (m/step-set "idempotent" #{s0} in {}))))
      (is (empty? (m/step-set "idempotent" #{s0} bad {}))))))
