(ns once.jepsen.rules
  "The claim rules R1-R10 of jepsen/README.md, 'Checker rules' (as corrected), the same
  rules as jepsen/local/oncecheck (claims.py, events.py), on plain op maps.

  Pure Clojure: this namespace needs nothing but clojure.core, clojure.set
  and clojure.string, so its tests (test/once/jepsen/rules_test.clj) run with
  Debian's clojure 1.11 alone, on the hand-written histories of
  jepsen/local/tests/histories. once.jepsen.checker wraps it as a Jepsen
  checker and adds Knossos.

  Ops are maps as Jepsen records them (jepsen.history.Op records work: they
  are maps). Client ops have an integer :process and :f :claim, :complete
  or :release; every other op (process :nemesis, :status, :checker ...) is
  an event. Values are oncectl's JSON fields with keyword keys, `_` or `-`
  (`:first-request-id`), or a jepsen.independent tuple [k v]: k the key (or
  [scope key]), v such a map. A completion's fields are merged over its
  invocation's. A client retry reuses a request id (calls sharing one are one
  logical op); a replay carries a fresh one."
  (:require [clojure.java.io :as io]
            [clojure.set :as set]
            [clojure.string :as str]))

(def INF
  "The return position of an :info call: it may take effect any time after
  its invocation."
  Long/MAX_VALUE)

(def client-fs #{"claim" "complete" "release"})

;; ---------------------------------------------------------------------------
;; Field access: keywords, strings, `_` or `-`

(defn kname
  "The name of a keyword or symbol, a string itself, else nil."
  [v]
  (cond (keyword? v) (name v)
        (symbol? v)  (name v)
        (string? v)  v
        :else        nil))

(defn norm-value
  "A map with plain keyword keys in the `-` form, or nil if v is no map."
  [v]
  (when (map? v)
    (persistent!
      (reduce-kv (fn [m k x]
                   (if-let [n (kname k)]
                     (assoc! m (keyword (str/replace n "_" "-")) x)
                     m))
                 (transient {}) v))))

(defn s
  "A string field: strings, keywords, numbers, booleans; other values
  printed; nil stays nil."
  [v]
  (cond (nil? v)                       nil
        (or (keyword? v) (symbol? v))  (name v)
        (boolean? v)                   (if v "true" "false")
        (string? v)                    v
        (number? v)                    (str v)
        :else                          (pr-str v)))

(defn int-field
  "An integer field (an integer or a decimal string), else nil."
  [v]
  (cond (boolean? v) nil
        (integer? v) (long v)
        (string? v)  (try (Long/parseLong v) (catch NumberFormatException _ nil))
        :else        nil))

(defn bool-field [v]
  (cond (boolean? v) v
        (string? v)  ({"true" true "false" false} (str/lower-case v))
        :else        nil))

(defn- unreadable [msg op]
  (throw (ex-info msg {:type ::unreadable :op op})))

;; ---------------------------------------------------------------------------
;; Ops, calls, events

(defn op
  "One history op as {:type :process :f :time :index :value :raw :pos}:
  type and f as strings, process an integer (client) or a string (event)."
  [raw pos]
  (when-not (map? raw) (unreadable "expected an op map" raw))
  (let [type (kname (:type raw))
        p    (:process raw)]
    (when-not (#{"invoke" "ok" "fail" "info"} type)
      (unreadable (str "op has no valid :type (" (pr-str (:type raw)) ")") raw))
    {:type    type
     :process (cond (and (integer? p) (not (boolean? p))) (long p)
                    (kname p) (kname p)
                    (nil? p) nil
                    :else (pr-str p))
     :f       (kname (:f raw))
     :time    (:time raw)
     :index   (let [i (:index raw)] (when (integer? i) (long i)))
     :value   (:value raw)
     :raw     raw
     :pos     pos}))

(defn ops
  "Ops of a history (a sequence of maps) in real-time order: by :index when
  every op has one (they must be unique), else in the given order."
  [history]
  (let [os (map-indexed (fn [i o] (op o i)) history)
        with-index (filter :index os)]
    (if (empty? with-index)
      (vec os)
      (do (when (not= (count with-index) (count os))
            (unreadable "op without :index in a history that has them"
                        (:raw (first (remove :index os)))))
          (let [dups (->> os (map :index) frequencies (filter #(< 1 (val %))))]
            (when (seq dups)
              (unreadable (str "duplicate :index " (key (first dups))) nil)))
          (->> os (sort-by :index) (map-indexed (fn [i o] (assoc o :pos i))) vec)))))

(defn client? [o] (integer? (:process o)))

(defn- split-value
  "[k v] of an op value: k the jepsen.independent key or nil."
  [v]
  (if (and (sequential? v) (= 2 (count v)) (not (map? v)))
    [(first v) (second v)]
    [nil v]))

(defn- op-fields
  "The normalized fields of a client op's value, tuple key folded in."
  [o]
  (when o
    (let [[ik v] (split-value (:value o))
          nv     (norm-value v)]
      (when (and (nil? nv) (some? v))
        (unreadable "client op :value is not a map" (:raw o)))
      (cond-> (or nv {})
        (and (sequential? ik) (= 2 (count ik)))
        (#(merge {:scope (first ik) :key (second ik)} %))
        (and (some? ik) (not (sequential? ik)))
        (#(merge {:key ik} %))))))

(defn call
  "One client call from its invocation and completion (nil: left open, an
  :info). :inv and :ret are real-time positions (:ret INF for :info)."
  [inv ret]
  (let [iv   (op-fields inv)
        rv   (op-fields ret)
        v    (merge iv rv)
        type (if ret (:type ret) "info")
        kind (or (s (:kind v)) (when (bool-field (:idempotent v)) "IDEMPOTENT"))
        arg  (s (:result-b64 iv))]
    {:f            (:f inv)
     :process      (:process inv)
     :inv          (:pos inv)
     :ret          (if (and ret (not= "info" type)) (:pos ret) INF)
     :type         type
     :v            v
     :scope        (or (s (:scope v)) "")
     :key          (s (:key v))
     :rid          (s (:request-id v))
     :node         (s (:node v))
     :outcome      (some-> (s (:outcome v)) str/upper-case)
     :retry        (boolean (bool-field (:retry v)))
     :first-rid    (s (:first-request-id v))
     :first-index  (int-field (:first-index v))
     :first-time   (int-field (:first-time-ms v))
     :token        (s (:owner-token v))
     :attempt      (int-field (:owner-attempt v))
     ;; complete: the result sent is the invocation's :result-b64 (default
     ;; empty); the completion's is what the cluster returned (stored)
     :arg-result   (if (and (nil? arg) (= "complete" (:f inv))) "" arg)
     :res-result   (when ret (s (:result-b64 rv)))
     :terminal     (boolean (bool-field (:terminal iv)))
     :stored-error (s (:stored-error v))
     :kind         (some-> kind str/upper-case)
     :final        (boolean (bool-field (:final v)))
     ;; a windowed claim (signed timestamp): its record may be pruned, so a
     ;; later STALE is a definite answer (R7)
     :windowed     (or (some? (:ts v)) (some? (:window v)))
     :error        (s (:error v))
     :applied      (s (:applied v))
     :inv-op       inv
     :ret-op       ret}))

(defn kkey [c] [(:scope c) (:key c)])

(defn pair
  "{:calls :events}: client calls in invocation order (each with an :id) and
  the other ops. Throws ex-info ::unreadable for a completion without an
  invocation or a second invocation on a busy process."
  [os]
  (loop [os os, open {}, calls [], events []]
    (if-let [o (first os)]
      (cond
        (not (client? o)) (recur (rest os) open calls (conj events o))
        (= "invoke" (:type o))
        (do (when (open (:process o))
              (unreadable (str "process " (:process o)
                               " invoked again while its op is still open") (:raw o)))
            (recur (rest os) (assoc open (:process o) o) calls events))
        :else
        (let [inv (open (:process o))]
          (when-not inv
            (unreadable (str "completion (:" (:type o) ") on process " (:process o)
                             " without an invocation") (:raw o)))
          (when (and (:f o) (not= (:f o) (:f inv)))
            (unreadable "completion :f does not match its invocation" (:raw o)))
          (recur (rest os) (dissoc open (:process o)) (conj calls (call inv o)) events)))
      (let [calls (->> (concat calls (map #(call % nil) (vals open)))
                       (sort-by :inv)
                       (map-indexed #(assoc %2 :id %1))
                       vec)]
        (doseq [c calls :when (and (client-fs (:f c)) (nil? (:key c)))]
          (unreadable (str (:f c) " op without :key") (:raw (:inv-op c))))
        {:calls calls :events events}))))

;; ---------------------------------------------------------------------------
;; Anomalies

(defn anomaly
  ([rule nm key msg calls] (anomaly rule nm key msg calls [] true))
  ([rule nm key msg calls events fatal?]
   {:rule rule :name nm :key key :message msg
    :calls (vec calls) :events (vec events) :fatal? fatal?}))

(defn- first-by
  "The first element per distinct (f x), in order."
  [f xs]
  (vals (reduce (fn [m x] (let [k (f x)] (if (contains? m k) m (assoc m k x))))
                (array-map) xs)))

(defn- add-label [m l c] (if (or (nil? l) (contains? m l)) m (assoc m l c)))

(defn- ids [cs] (set (map :id cs)))

(defn- min-ret [cs] (apply min-key :ret cs))

;; ---------------------------------------------------------------------------
;; R1-R5: NONCE keys (exactly linearizability of the write-once model)

;; R3 for a NONCE key with no ACCEPTED answer whose denials name no first
;; request id: an :info claim with a request id no denial carries must have
;; been invoked before the first denial was answered.
(defn- denial-without-winner [key claims D]
  (when (seq D)
    (let [bound  (min-ret D)
          denied (set (map :rid D))]
      (when-not (some #(and (= "info" (:type %)) (not (denied (:rid %))) (< (:inv %) (:ret bound)))
                      claims)
        [(anomaly "R3" :denial-without-winner key
                  (str "REPLAYED while no ACCEPTED exists and no other claim (an :info one "
                       "invoked before the denial was answered) could have been first")
                  [bound])]))))

(defn check-nonce
  "Anomalies of one NONCE key's calls. rid-keys: request id -> keys it was
  used on (to name cross-key bleed)."
  [key calls rid-keys]
  (let [claims (filter #(= "claim" (:f %)) calls)
        ok     (filter #(= "ok" (:type %)) claims)
        A      (filter #(= "ACCEPTED" (:outcome %)) ok)
        A0     (remove :retry A)
        A1     (filter :retry A)
        a1     (ids A1)
        D      (filter #(= "REPLAYED" (:outcome %)) ok)
        rids   (set (map :rid A))
        double (< 1 (count rids))
        labels (as-> {} m
                 (reduce (fn [m c] (-> m (add-label (:rid c) c) (add-label (:first-rid c) c))) m A)
                 (reduce (fn [m c] (add-label m (:first-rid c) c)) m D))
        self   (filter #(and (:first-rid %) (= (:first-rid %) (:rid %))) D)
        out    (cond-> []
                 double
                 (conj (anomaly "R1" :double-accept key
                                (str (count rids) " request ids were ACCEPTED")
                                (first-by :rid A)))
                 (and (not double) (< 1 (count A0)))
                 (conj (anomaly "R1" :re-accepted key
                                (str "request id " (:rid (first A0)) " was ACCEPTED retry=false "
                                     (count A0) " times: the record was lost and accepted again")
                                A0))
                 (and (< 1 (count labels)) (not double))
                 (conj (anomaly "R2" :conflicting-winner key
                                (str "answers name " (count labels) " different first request ids: "
                                     (str/join ", " (sort (keys labels))))
                                (vals labels))))
        out    (into out (for [c self]
                           (anomaly "R3" :self-deny key
                                    (str "REPLAYED names its own request id " (:rid c)
                                         " as the first use")
                                    [c])))]
    (cond
      (empty? labels) (into out (denial-without-winner key claims D))
      (not= 1 (count labels)) out
      :else
      (let [w     (first (keys labels))
            ;; a REPLAYED naming no first request id, answered to w itself
            out   (into out (for [c D :when (and (nil? (:first-rid c)) (= w (:rid c)))]
                              (anomaly "R3" :self-deny key
                                       (str "REPLAYED answered to " w ", the only request id "
                                            "that can have been first")
                                       [c])))
            cands (if (seq A0)
                    A0
                    (filter #(and (= w (:rid %)) (or (a1 (:id %)) (= "info" (:type %)))) claims))]
        (if (empty? cands)
          (let [named   (filter #(= w (:rid %)) claims)
                deniers (filter #(= w (:first-rid %)) D)]
            (cond
              (seq self) out
              (empty? named)
              (conj out (anomaly "R3" :phantom-winner key
                                 (str "answers name first request id " w
                                      ", which no call on this key carried"
                                      (when-let [ks (get rid-keys w)]
                                        (str " (that request id belongs to key "
                                             (pr-str (first (sort-by pr-str ks)))
                                             ": cross-key bleed)")))
                                 deniers))
              (every? #(= "fail" (:type %)) named)
              (conj out (anomaly "R5" :failed-op-took-effect key
                                 (str "the first request id " w
                                      " only ever failed (applied false)")
                                 (concat named deniers)))
              :else
              (conj out (anomaly "R3" :deny-op-named-winner key
                                 (str "the first request id " w " was never ACCEPTED and never "
                                      "unknown: its calls were denied")
                                 (concat named deniers)))))
          (let [bound (min-ret (concat D A))]
            (if (some #(< (:inv %) (:ret bound)) cands)
              out
              (conj out (anomaly "R4" :real-time key
                                 (str (cond (= "REPLAYED" (:outcome bound)) "a REPLAYED"
                                            (:retry bound) "an ACCEPTED retry=true"
                                            :else "an ACCEPTED")
                                      " naming " w " was acknowledged before any call that "
                                      "could have accepted " w " was invoked")
                                 (cons bound cands))))))))))

;; ---------------------------------------------------------------------------
;; R1-R6: IDEMPOTENT keys (necessary conditions of linearizability)

(defn- ok? [c] (= "ok" (:type c)))
(defn- info? [c] (= "info" (:type c)))
(defn- outcome? [o c] (and (ok? c) (= o (:outcome c))))

(defn- check-idem-r1 [key AC]
  (let [pairs-att (for [[att cs] (group-by :attempt (filter :attempt AC))
                        :let [prev (first cs)]
                        c (rest cs)]
                    [att prev c])
        pairs-tok (for [[_ cs] (group-by :token (filter :token AC))
                        :let [prev (first cs)]
                        c (rest cs)]
                    [prev c])]
    (concat
      (for [[att prev c] pairs-att
            :let [diff (or (not= (:rid prev) (:rid c))
                           (and (:token c) (:token prev) (not= (:token c) (:token prev))))]
            :when (or diff (and (not (:retry prev)) (not (:retry c))))]
        (if diff
          (anomaly "R1" :double-accept key
                   (str "owner_attempt " att " was given to " (:rid prev) " (token " (:token prev)
                        ") and " (:rid c) " (token " (:token c) ")")
                   [prev c])
          (anomaly "R1" :re-accepted key
                   (str "request id " (:rid c) " was ACCEPTED retry=false twice with owner_attempt "
                        att)
                   [prev c])))
      (for [[prev c] pairs-tok
            :when (or (not= (:rid prev) (:rid c))
                      (and (:attempt c) (:attempt prev) (not= (:attempt c) (:attempt prev))))]
        (anomaly "R1" :double-accept key
                 (str "owner token " (:token c) " was given to " (:rid prev) " (attempt "
                      (:attempt prev) ") and " (:rid c) " (attempt " (:attempt c) ")")
                 [prev c]))
      (for [a AC, b AC
            :when (and (not= (:rid a) (:rid b)) (< (:ret a) (:inv b))
                       (:attempt a) (:attempt b) (<= (:attempt b) (:attempt a)))]
        (anomaly "R1" :double-accept key
                 (str (:rid b) " was ACCEPTED (owner_attempt " (:attempt b) ") after " (:rid a)
                      "'s ACCEPTED (owner_attempt " (:attempt a)
                      ") was acknowledged: not a fencing takeover")
                 [a b])))))

(defn check-idempotent
  "Anomalies of one IDEMPOTENT key's calls (claims, completes, releases)."
  [key calls rid-keys]
  (let [claims    (filter #(= "claim" (:f %)) calls)
        completes (filter #(= "complete" (:f %)) calls)
        releases  (filter #(= "release" (:f %)) calls)
        has-rel   (some #(not= "fail" (:type %)) releases)
        ok-claims (filter ok? claims)
        AC        (filter #(= "ACCEPTED" (:outcome %)) ok-claims)
        terminal  (concat (filter #(outcome? "COMPLETED" %) completes)
                          (filter #(#{"DUPLICATE" "FAILED"} (:outcome %)) ok-claims)
                          (filter #(outcome? "FAILED" %) releases))
        CM        (filter #(outcome? "COMPLETED" %) completes)
        CM0       (remove :retry CM)
        ctoks     (first-by :token CM)
        firsts    (reduce (fn [m c]
                            (cond-> (add-label m (:first-rid c) c)
                              (and (= "ACCEPTED" (:outcome c)) (= 1 (:attempt c)))
                              (add-label (:rid c) c)))
                          {} ok-claims)
        issued    (group-by :token (filter :token AC))
        RL        (filter #(and (ok? %) (#{"RELEASED" "FAILED"} (:outcome %))) releases)
        DU        (filter #(= "DUPLICATE" (:outcome %)) ok-claims)
        info-cm   (filter info? completes)
        done-tok  (into {} (map (juxt :token identity) (reverse CM)))
        maybe     (filter #(or (info? %) (= "ACCEPTED" (:outcome %))) claims)
        out       (vec (check-idem-r1 key AC))
        ;; R1 claim-after-complete
        out (if (seq terminal)
              (let [t0 (min-ret terminal)]
                (into out (for [c ok-claims
                                :when (and (#{"ACCEPTED" "IN_PROGRESS"} (:outcome c))
                                           (> (:inv c) (:ret t0)))]
                            (anomaly "R1" :claim-after-complete key
                                     (str "a claim invoked after the record was "
                                          (if (not= "FAILED" (:outcome t0)) "completed" "failed")
                                          " answered " (:outcome c))
                                     [t0 c]))))
              out)
        ;; R2
        out (cond-> out
              (< 1 (count ctoks))
              (conj (anomaly "R2" :double-complete key
                             (str "COMPLETED with " (count ctoks) " owner tokens: "
                                  (str/join ", " (sort (map str (map :token ctoks)))))
                             ctoks))
              (and (<= (count ctoks) 1) (< 1 (count CM0)))
              (conj (anomaly "R2" :re-completed key
                             (str (count CM0) " COMPLETED retry=false answers: at most one "
                                  "successful Complete")
                             CM0))
              (< 1 (count firsts))
              (conj (anomaly "R2" :conflicting-first key
                             (str "answers name " (count firsts) " first request ids: "
                                  (str/join ", " (sort (keys firsts))))
                             (vals firsts))))
        ;; R3/R4 on completions and releases
        out (into out
                  (mapcat
                    (fn [c]
                      (if-not (contains? issued (:token c))
                        [(anomaly "R3" :phantom-token key
                                  (str (:outcome c) " with owner token " (:token c)
                                       ", which no ACCEPTED claim of this key returned")
                                  [c])]
                        (let [issuers (issued (:token c))
                              irids   (set (map :rid issuers))
                              cands   (concat issuers (filter #(and (info? %) (irids (:rid %))) claims))
                              att     (some->> (keep :attempt issuers) seq (apply min))
                              fenced  (when (and (= "complete" (:f c)) att)
                                        (first (filter #(and (:token %) (not= (:token %) (:token c))
                                                             (:attempt %) (> (:attempt %) att)
                                                             (< (:ret %) (:inv c)))
                                                       AC)))]
                          (cond-> []
                            (not (some #(< (:inv %) (:ret c)) cands))
                            (conj (anomaly "R4" :complete-before-accept key
                                           (str (:outcome c) " with token " (:token c)
                                                " was acknowledged before the claim that issued it "
                                                "was invoked")
                                           (cons c issuers)))
                            fenced
                            (conj (anomaly "R4" :fenced-token-completed key
                                           (str "token " (:token c) " (owner_attempt " att
                                                ") COMPLETED after a takeover (owner_attempt "
                                                (:attempt fenced) ") was acknowledged: NOT_OWNER expected")
                                           [fenced c]))))))
                    (concat CM RL)))
        ;; DUPLICATE
        out (if (seq DU)
              (let [cands (if (seq CM0) CM0 (concat CM info-cm))]
                (if (empty? cands)
                  (let [failed (filter #(= "fail" (:type %)) completes)]
                    (conj out (if (seq failed)
                                (anomaly "R5" :failed-op-took-effect key
                                         "DUPLICATE, but every complete failed (applied false)"
                                         (concat (take 1 DU) failed))
                                (anomaly "R3" :phantom-completion key
                                         "DUPLICATE, but no complete of this key could have applied"
                                         (take 3 DU)))))
                  (let [bound    (min-ret (concat DU CM))
                        allowed  (set (map :arg-result cands))
                        returned (first-by :res-result (filter :res-result (concat DU CM)))
                        bad      (remove #(allowed (:res-result %)) returned)]
                    (cond-> out
                      (not (some #(< (:inv %) (:ret bound)) cands))
                      (conj (anomaly "R4" :duplicate-before-complete key
                                     (str (:outcome bound) " was acknowledged before any complete "
                                          "that could have stored the result was invoked")
                                     (cons bound cands)))
                      (or (< 1 (count returned)) (seq bad))
                      (conj (anomaly "R6" :duplicate-result key
                                     (str "answers return " (count returned) " stored results ("
                                          (str/join ", " (map (comp pr-str :res-result) returned))
                                          "); the successful Complete stored "
                                          (str/join " or " (map pr-str (sort-by str allowed))))
                                     (concat returned (take 2 cands))))))))
              out)
        ;; NOT_OWNER
        out (into out
                  (keep
                    (fn [n]
                      (let [done (done-tok (:token n))]
                        (cond
                          (and done (< (:ret done) (:inv n)) (= "complete" (:f n)))
                          (anomaly "R4" :fenced-without-takeover key
                                   (str "NOT_OWNER for token " (:token n) " after its COMPLETED "
                                        "was acknowledged (COMPLETED retry=true expected)")
                                   [done n])
                          (not (contains? issued (:token n))) nil
                          :else
                          (let [irids  (set (map :rid (issued (:token n))))
                                others (filter #(and (or (outcome? "ACCEPTED" %) (info? %))
                                                     (not (and (outcome? "ACCEPTED" %)
                                                               (= (:token %) (:token n))))
                                                     (or has-rel (not (irids (:rid %)))))
                                               claims)]
                            (when-not (some #(< (:inv %) (:ret n)) others)
                              (anomaly "R4" :fenced-without-takeover key
                                       (str "NOT_OWNER for token " (:token n) ", but no other claim "
                                            "could have taken the record over")
                                       (concat (take 1 (issued (:token n))) [n])))))))
                    (filter #(outcome? "NOT_OWNER" %) (concat completes releases))))
        ;; answers that need a record, or an owner other than the caller
        out (into out
                  (keep
                    (fn [n]
                      (let [o (:outcome n)]
                        (cond
                          (and (= "IN_PROGRESS" o) (= "claim" (:f n)))
                          (when-not (some #(and (< (:inv %) (:ret n)) (not= (:rid %) (:rid n))) maybe)
                            (anomaly "R3" :in-progress-without-owner key
                                     "IN_PROGRESS, but no other claim could own the record" [n]))
                          (and (= "NOT_OWNER" o) (#{"complete" "release"} (:f n)))
                          (when-not (some #(< (:inv %) (:ret n)) maybe)
                            (anomaly "R3" :not-owner-without-record key
                                     "NOT_OWNER, but no claim could have created the record" [n]))
                          (= "NOT_FOUND" o)
                          (when-let [acked (first (filter #(< (:ret %) (:inv n)) AC))]
                            (anomaly "R4" :not-found-after-accept key
                                     (str "NOT_FOUND after an ACCEPTED claim of the key was "
                                          "acknowledged: the record was lost")
                                     [acked n]))
                          (and (= "ACCEPTED" o) (:attempt n) (< 1 (:attempt n)))
                          (let [prior   (set (keep #(when (and (not= (:token %) (:token n))
                                                               (< (:inv %) (:ret n)))
                                                      (:token %))
                                                   AC))
                                ;; a token-less ACCEPTED counts as one (nil) token, as in claims.py
                                prior   (if (some #(and (nil? (:token %)) (some? (:token n))
                                                        (< (:inv %) (:ret n))) AC)
                                          (conj prior ::none) prior)
                                prior-n (+ (count prior)
                                           (count (filter #(and (info? %) (< (:inv %) (:ret n))) claims)))]
                            (when (< prior-n (dec (:attempt n)))
                              (anomaly "R3" :takeover-without-owner key
                                       (str "ACCEPTED with owner_attempt " (:attempt n)
                                            ", but at most " prior-n
                                            " earlier acceptances could have happened")
                                       [n])))
                          (and (= "FAILED" o) (= "claim" (:f n)))
                          (when-not (some #(and (:terminal %) (#{"ok" "info"} (:type %))
                                                (< (:inv %) (:ret n)))
                                          releases)
                            (anomaly "R3" :phantom-failure key
                                     "claim answered FAILED, but no terminal release could have applied"
                                     [n])))))
                    (concat ok-claims (filter ok? (concat completes releases)))))
        ;; R6: a COMPLETED retry=false returns the result it stored
        out (into out (for [c CM0
                            :when (and (:res-result c) (not= (:res-result c) (:arg-result c)))]
                        (anomaly "R6" :duplicate-result key
                                 (str "COMPLETED returns " (pr-str (:res-result c)) ", but stored "
                                      (pr-str (:arg-result c)))
                                 [c])))]
    out))

(defn check-first-result
  "R6: first_index and first_time_ms agree across a key's claim answers."
  [key calls]
  (for [[field nm] [[:first-index "first_index"] [:first-time "first_time_ms"]]
        :let [vals (first-by field (filter #(and (= "claim" (:f %)) (ok? %) (some? (field %))) calls))]
        :when (< 1 (count vals))]
    (anomaly "R6" :first-result key
             (str "answers report " (count vals) " different " nm ": "
                  (str/join ", " (sort (map field vals))))
             vals)))

(defn workload
  "\"idempotent\" if any call is an IDEMPOTENT claim, a complete or a
  release; else \"nonce\"."
  [calls]
  (if (some #(or (#{"complete" "release"} (:f %)) (= "IDEMPOTENT" (:kind %))) calls)
    "idempotent"
    "nonce"))

;; ---------------------------------------------------------------------------
;; R7-R10: events

(def crash-re #"Assertion|AddressSanitizer|runtime error|raft_start\(\)|Segmentation")

(defn- ev-value [e] (or (norm-value (:value e)) {}))

(defn- ev-time [e] (let [t (:time e)] (when (and (number? t) (not (boolean? t))) t)))

(def ^:private idem-record
  "What a definite final probe of an acknowledged IDEMPOTENT key may answer
  besides a takeover (ACCEPTED with owner_attempt > 1)."
  #{"IN_PROGRESS" "DUPLICATE" "FAILED"})

(defn- keeps-record? [p idem? windowed?]
  (if idem?
    (or (contains? idem-record (:outcome p))
        (and (= "ACCEPTED" (:outcome p)) (:attempt p) (< 1 (:attempt p))))
    (or (= "REPLAYED" (:outcome p)) (and windowed? (= "STALE" (:outcome p))))))

(defn check-r7
  "After the last :final-phase event, every key with an :ok or :info call
  has a definite (:ok) final probe (a claim with :final true) through every
  member listed, and every key with an acknowledged ACCEPTED claim is still
  there in every definite probe's answer. Returns [anomalies skip-reason]."
  [calls events]
  (let [fin (last (filter #(= "final-phase" (:f %)) events))]
    (if-not fin
      [[] "no :final-phase event in the history"]
      (let [members  (map s (:members (ev-value fin)))
            by-key   (group-by kkey calls)
            probes   (reduce (fn [m c] (update-in m [(kkey c) (:node c)] (fnil conj []) c))
                             {} (filter #(and (:final %) (= "claim" (:f %))) calls))
            first-of (fn [pred] (reduce (fn [m c] (if (contains? m (kkey c)) m (assoc m (kkey c) c)))
                                        {} (filter #(and (not (:final %)) (pred %)) calls)))
            seen     (first-of #(#{"ok" "info"} (:type %)))
            accepted (first-of #(and (= "claim" (:f %)) (ok? %) (= "ACCEPTED" (:outcome %))))
            ks       (sort-by pr-str (keys seen))
            missing  (for [k ks
                           :let [lack (remove (get probes k {}) members)]
                           :when (seq lack)]
                       [k lack])
            vague    (for [k ks
                           :let [got (get probes k {})
                                 lack (filter #(and (contains? got %) (not-any? ok? (got %))) members)]
                           :when (seq lack)]
                       [k lack])
            lost     (for [k ks
                           :when (accepted k)
                           :let [idem? (= "idempotent" (workload (by-key k)))
                                 win?  (boolean (some :windowed (by-key k)))
                                 bad   (for [ps (vals (get probes k {})) p ps
                                             :when (and (ok? p) (not (keeps-record? p idem? win?)))]
                                         p)]
                           :when (seq bad)]
                       (anomaly "R7" :lost-ack k
                                (str "an ACCEPTED claim was acknowledged, but " (count bad)
                                     " definite final probes answer "
                                     (str/join ", " (sort (set (map #(or (:outcome %) "?") bad))))
                                     " (" (if idem? "IN_PROGRESS, DUPLICATE, FAILED or a takeover"
                                              "REPLAYED")
                                     " expected): the acknowledged record is gone")
                                (cons (accepted k) (take 3 bad))))]
        [(vec (concat
                lost
                (when-let [[k lack] (first missing)]
                  [(anomaly "R7" :missing-final-probe nil
                            (str (count missing) " keys lack a final probe through some member; first: "
                                 (pr-str k) " lacks " (str/join ", " lack))
                            [(seen k)] [fin] true)])
                (when-let [[k lack] (first vague)]
                  [(anomaly "R7" :final-probe-not-definite nil
                            (str (count vague) " keys have no definite (:ok) final probe through "
                                 "some member (the probes' deadline passed); first: " (pr-str k)
                                 " through " (str/join ", " lack))
                            (cons (seen k) (take 3 (mapcat (get probes k) lack))) [fin] true)])))
         nil]))))

(defn- log-matches
  "R8 anomalies for crash patterns in log files (paths); at most one per file."
  [log-files]
  (for [path log-files
        :let [hit (try (with-open [r (io/reader path)]
                         (first (keep-indexed (fn [i line] (when (re-find crash-re line) [(inc i) line]))
                                              (doall (line-seq r)))))
                       (catch java.io.IOException e [:error (.getMessage e)]))]
        :when hit]
    (if (= :error (first hit))
      (anomaly "R8" :crash-in-log nil (str "cannot read log " path ": " (second hit)) [] [] true)
      (anomaly "R8" :crash-in-log nil
               (str path ":" (first hit) ": " (subs (str/trim (second hit))
                                                   0 (min 200 (count (str/trim (second hit))))))
               [] [] true))))

(defn check-r8
  "Liveness after the final heal: a leader within leader-within-s seconds,
  every listed member a voter in the last leader sample; crash reports from :log-scan / :core-dump events and log
  files. Returns [anomalies skip-reason]."
  [calls events log-files leader-within-s]
  (let [crash (concat
                (for [e events
                      :let [v (ev-value e)]
                      :when (and (= "log-scan" (:f e)) (seq (:matches v)))]
                  (anomaly "R8" :crash-in-log nil
                           (str "node " (s (:node v)) " log " (s (:file v)) " matches: "
                                (str/join "; " (map s (take 3 (:matches v)))))
                           [] [e] true))
                (for [e events :when (= "core-dump" (:f e)) :let [v (ev-value e)]]
                  (anomaly "R8" :core-dump nil
                           (str "core dump of node " (s (:node v)) ": " (s (:file v))) [] [e] true))
                (log-matches log-files))
        fin    (last (filter #(= "final-phase" (:f %)) events))
        status (filter #(= "status" (:f %)) events)]
    (if-not fin
      [(vec crash) "no :final-phase event: only the log scans were checked"]
      (let [t0      (ev-time fin)
            members (map s (:members (ev-value fin)))
            after?  (fn [x] (if (and t0 (ev-time x)) (>= (ev-time x) t0) (> (:pos x) (:pos fin))))
            leaders (filter #(and (after? %) (= "LEADER" (some-> (s (:role (ev-value %))) str/upper-case)))
                            status)
            first-l (first leaders)
            out     (cond-> (vec crash)
                      (and (seq status)
                           (or (nil? first-l)
                               (and t0 (ev-time first-l)
                                    (> (- (ev-time first-l) t0) (* leader-within-s 1e9)))))
                      (conj (anomaly "R8" :no-leader nil
                                     (str "no leader within " leader-within-s
                                          " s after the final phase began")
                                     [] (remove nil? [fin first-l]) true))
                      (and (seq leaders) (seq members))
                      (as-> out
                        (let [last-l (last leaders)
                              voters (set (for [m (:members (ev-value last-l))
                                                :let [mv (or (norm-value m) {})]
                                                :when (= "voter" (some-> (s (:role mv)) str/lower-case))]
                                            (s (:client-addr mv))))
                              lack   (remove voters members)]
                          (cond-> out
                            (seq lack)
                            (conj (anomaly "R8" :member-not-voter nil
                                           (str "intended members not voters in the last leader sample: "
                                                (str/join ", " lack))
                                           [] [fin last-l] true)))))
)]
        [out (when (empty? status) "no status samples: leader and voter checks skipped")]))))

(defn check-r9
  "Replicas at one applied index have one digest of the applied entries
  (:digest) and, where sampled, one digest of the state machine
  (:state-digest). [anomalies skip-reason]"
  [events]
  (let [dumps (filter #(= "dump" (:f %)) events)]
    (if (empty? dumps)
      [[] "no :dump events"]
      (let [groups (sort-by key (group-by #(int-field (:applied-index (ev-value %)))
                                          (filter #(int-field (:applied-index (ev-value %))) dumps)))]
        [(vec (concat
                (for [[idx es] groups
                      :let [dg (first-by #(s (:digest (ev-value %))) es)]
                      :when (< 1 (count dg))]
                  (anomaly "R9" :replica-divergence nil
                           (str (count dg) " different digests at applied index " idx)
                           [] dg true))
                (for [[idx es] groups
                      :let [sd (first-by #(s (:state-digest (ev-value %)))
                                         (filter #(some? (:state-digest (ev-value %))) es))]
                      :when (< 1 (count sd))]
                  (anomaly "R9" :state-divergence nil
                           (str (count sd) " different state-machine digests at applied index " idx)
                           [] sd true))))
         nil]))))

(defn- voter-ids
  "Raft's own voters at :config-index (:config-voters) when sampled; else
  the directory's voters (:members), the state machine's copy."
  [v]
  (if (some? (:config-voters v))
    (set (map s (:config-voters v)))
    (set (for [m (:members v)
               :let [mv (or (norm-value m) {})]
               :when (= "voter" (some-> (s (:role mv)) str/lower-case))]
           (s (:id mv))))))

(defn check-r10
  "Raft invariants from status samples: one leader per term; one voter set
  per committed configuration index; successive committed configurations
  differ by at most one voter (a warning). [anomalies skip-reason]"
  [events]
  (let [st (filter #(= "status" (:f %)) events)]
    (if (empty? st)
      [[] "no :status samples"]
      (let [leaders (reduce (fn [m e]
                              (let [v (ev-value e)
                                    node (or (s (:node-id v)) (s (:node v)))
                                    term (int-field (:term v))]
                                (if (and term (= "LEADER" (some-> (s (:role v)) str/upper-case)))
                                  (update-in m [term node] #(or % e))
                                  m)))
                            (sorted-map) st)
            configs (reduce (fn [m e]
                              (let [v  (ev-value e)
                                    ci (int-field (:config-index v))
                                    cm (int-field (:commit-index v))]
                                (if (and ci cm (<= ci cm) (or (some? (:config-voters v)) (some? (:members v))))
                                  (update-in m [ci (voter-ids v)] #(or % e))
                                  m)))
                            (sorted-map) st)
            seqv    (for [[ci vs] configs] [ci (first (keys vs))])]
        [(vec (concat
                (for [[term nodes] leaders :when (< 1 (count nodes))]
                  (anomaly "R10" :two-leaders nil
                           (str (count nodes) " leaders in term " term ": "
                                (str/join ", " (sort (keys nodes))))
                           [] (vals nodes) true))
                (for [[ci vs] configs :when (< 1 (count vs))]
                  (anomaly "R10" :config-disagreement nil
                           (str (count vs) " voter sets for committed configuration index " ci)
                           [] (vals vs) true))
                (for [[[i1 a] [i2 b]] (map vector seqv (rest seqv))
                      :let [d (count (set/union (set/difference a b) (set/difference b a)))]
                      :when (< 1 d)]
                  (anomaly "R10" :multi-voter-change nil
                           (str "observed committed configurations " i1 " -> " i2 " differ by " d
                                " voters (advisory: sampling may have missed one between)")
                           [] [(get-in configs [i1 a]) (get-in configs [i2 b])] false))))
         nil]))))

;; ---------------------------------------------------------------------------
;; The whole history

(def liveness
  "What :safety-only? keeps in the report without failing on it: the final
  probes' and the cluster's liveness. A lost acknowledgement (R7 lost-ack)
  always fails."
  #{:missing-final-probe :final-probe-not-definite :crash-in-log :core-dump :no-leader
    :member-not-voter})

(defn check-calls
  "Checks paired calls and events. Options: :log-files (paths scanned for
  crash patterns, R8), :safety-only? (liveness reported, not fatal),
  :leader-within-s (R8, default 30). Returns {:valid? :anomalies :skipped
  :stats}."
  ([calls events] (check-calls calls events {}))
  ([calls events {:keys [log-files safety-only? leader-within-s]
                  :or {leader-within-s 30}}]
   (let [cs       (filter #(client-fs (:f %)) calls)
         by-key   (group-by kkey cs)
         rid-keys (reduce (fn [m c] (if (:rid c) (update m (:rid c) (fnil conj #{}) (kkey c)) m))
                          {} cs)
         warn-two (for [[rid ks] rid-keys :when (< 1 (count ks))]
                    (anomaly "R1" :request-id-on-two-keys nil
                             (str "request id " rid " is used on " (count ks)
                                  " keys (a harness bug: ids are per call)")
                             (take 4 (filter #(= rid (:rid %)) cs)) [] false))
         per-key  (for [[k kcs] by-key]
                    (let [wl (workload kcs)]
                      [wl (concat (if (= "nonce" wl)
                                    (check-nonce k kcs rid-keys)
                                    (check-idempotent k kcs rid-keys))
                                  (check-first-result k kcs))]))
         [r7 s7]  (check-r7 calls events)
         [r8 s8]  (check-r8 calls events log-files leader-within-s)
         [r9 s9]  (check-r9 events)
         [r10 s10] (check-r10 events)
         anomalies (cond->> (vec (concat warn-two (mapcat second per-key) r7 r8 r9 r10))
                     safety-only? (mapv #(if (liveness (:name %)) (assoc % :fatal? false) %)))
         wls      (frequencies (map first per-key))]
     {:valid?    (not-any? :fatal? anomalies)
      :anomalies anomalies
      :skipped   (into {} (remove (comp nil? val) {"R7" s7 "R8" s8 "R9" s9 "R10" s10}))
      :stats     {:calls (count calls) :keys (count by-key)
                  :nonce-keys (get wls "nonce" 0) :idempotent-keys (get wls "idempotent" 0)
                  :ok (count (filter ok? calls)) :fail (count (filter #(= "fail" (:type %)) calls))
                  :info (count (filter info? calls)) :events (count events)}})))

(defn check-history
  "Checks a history (a sequence of op maps) plus extra events (e.g. the
  status samples of status.edn). Throws ex-info ::unreadable if it cannot be
  read (the message says why)."
  ([history] (check-history history [] {}))
  ([history extra-events opts]
   (let [{:keys [calls events]} (pair (ops history))
         extra (map-indexed (fn [i raw]
                              (let [o (op raw (+ 1000000000000 i))]
                                (when (client? o)
                                  (unreadable "client op among the extra events" raw))
                                o))
                            extra-events)]
     (check-calls calls (into events extra) opts))))

(defn summary
  "One line per anomaly (rule, name, key, message, the ops' :index or
  position), for logs and results.edn."
  [{:keys [anomalies]}]
  (for [a anomalies]
    (str (:rule a) " " (name (:name a))
         (when (:key a) (str " key=" (pr-str (:key a))))
         (when-not (:fatal? a) " (warning)")
         ": " (:message a)
         (let [ix (concat (for [c (:calls a)] (or (:index (:inv-op c)) (:pos (:inv-op c))))
                          (for [e (:events a)] (or (:index e) (:pos e))))]
           (when (seq ix) (str " [ops " (str/join " " (take 8 ix)) "]"))))))

(defn result-map
  "A checker result without the (large) op maps: anomalies keep the raw ops
  of their calls (invocation and completion) and events, at most 8."
  [res]
  (-> res
      (update :anomalies
              (partial mapv (fn [a]
                              (-> a
                                  (assoc :ops (vec (take 8 (mapcat (fn [c] (keep identity [(:raw (:inv-op c))
                                                                                          (:raw (:ret-op c))]))
                                                                   (:calls a)))))
                                  (assoc :event-ops (vec (take 8 (map :raw (:events a)))))
                                  (dissoc :calls :events)))))
      (assoc :summary (vec (summary res)))))
