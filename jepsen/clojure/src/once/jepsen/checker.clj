;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.checker
  "Jepsen checkers for once:
  * claims: R1-R10 (once.jepsen.rules, the rules jepsen/local/check
    applies) over the whole history, the status samples the nemesis wrote
    to status.edn, and the node logs Jepsen downloaded (crash patterns);
    writes claims.txt, one line per anomaly;
  * knossos: Knossos (linear) on every key through jepsen.independent, with
    the write-once model of once.jepsen.model (NONCE or IDEMPOTENT, a set of
    states so the model is deterministic);
  * membership: re-adding a retired id must have been refused.
  The same history also checks with jepsen/local/check
  (`jepsen/local/check store/latest/history.edn --samples
  store/latest/status.edn`)."
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [checker :as checker]
                    [independent :as independent]
                    [store :as store]]
            [knossos.model :as knossos]
            [once.jepsen.model :as m]
            [once.jepsen.rules :as rules]))

;; ---------------------------------------------------------------------------
;; R1-R10

(defn read-events
  "The events of an EDN file of one map a line (status.edn); [] if absent."
  [^java.io.File f]
  (if-not (.exists f)
    []
    (with-open [r (java.io.PushbackReader. (io/reader f))]
      (let [eof (Object.)]
        (loop [out []]
          (let [x (try (edn/read {:eof eof :default (fn [_ v] v)} r)
                       (catch Exception e
                         ;; a line cut by a kill at the end: keep what was read
                         (warn "status.edn:" (.getMessage e))
                         eof))]
            (if (identical? x eof) out (recur (conj out x)))))))))

(defn claims-checker
  "R1-R10 over the history, status.edn and the nodes' onced.log."
  []
  (reify checker/Checker
    (check [this test history opts]
      (let [extra (read-events (store/path test "status.edn"))
            logs  (for [node (:nodes test)
                        :let [f (store/path test node "onced.log")]
                        :when (.exists f)]
                    (str f))
            res   (try (rules/check-history (seq history) extra
                                            {:log-files logs :safety-only? (:safety-only test)})
                       (catch clojure.lang.ExceptionInfo e
                         (if (= :once.jepsen.rules/unreadable (:type (ex-data e)))
                           {:valid? :unknown :unreadable (.getMessage e)}
                           (throw e))))]
        (if (:unreadable res)
          res
          (let [out (rules/result-map res)]
            (with-open [w (io/writer (store/path! test "claims.txt"))]
              (doseq [l (:summary out)] (.write w (str l "\n")))
              (.write w (str (if (:valid? res) "VALID" "INVALID") " " (pr-str (:stats res)) "\n")))
            (update out :anomalies (partial take 50))))))))

;; ---------------------------------------------------------------------------
;; Knossos, per key

(defrecord ClaimModel [workload states rid-tokens]
  knossos/Model
  (step [this op]
    (let [in (m/input (:f op) (:value op))
          ns (m/step-set workload states in rid-tokens)]
      (if (empty? ns)
        (knossos/inconsistent
          (str (name (:f op)) " " (:request-id (:value op)) " "
               (or (:outcome (:value op)) "(unknown outcome)")
               " is impossible in every state the record may be in: " (pr-str states)))
        (ClaimModel. workload ns rid-tokens)))))

(defn knossos-history
  "A key's client ops for Knossos, as plain maps: :fail calls and answers
  outside the model (STALE, CONFLICT, ...) removed with their invocations
  (they constrain nothing), :info calls kept with their invocation's value.
  Returns [history workload rid-tokens]."
  [history]
  (let [client (filter #(integer? (:process %)) history)
        pairs  (loop [os client, open {}, out []]
                 (if-let [o (first os)]
                   (if (= :invoke (:type o))
                     (recur (rest os) (assoc open (:process o) o) (conj out [o nil]))
                     (let [inv (open (:process o))]
                       (recur (rest os) (dissoc open (:process o))
                              (if inv
                                (conj out [inv o])
                                out))))
                   out))
        ;; an invocation appears once alone (while open) and once paired; keep
        ;; the pair, or the lone invocation if it never completed
        done   (set (keep (fn [[i c]] (when c (:index i))) pairs))
        pairs  (remove (fn [[i c]] (and (nil? c) (done (:index i)))) pairs)
        kinds  (set (for [[i _] pairs] [(:f i) (some-> (:kind (:value i)) name str/upper-case)]))
        wl     (if (some (fn [[f k]] (or (#{:complete :release} f) (= "IDEMPOTENT" k))) kinds)
                 "idempotent" "nonce")
        keep?  (fn [[_ c]]
                 (case (:type c)
                   nil   true
                   :info true
                   :fail false
                   :ok   (m/modeled? (name (:f c)) wl
                                     (some-> (:outcome (:value c)) name str/upper-case))))
        kept   (filter keep? pairs)
        plain  (fn [o] {:index (:index o) :time (:time o) :type (:type o) :process (:process o)
                        :f (:f o) :value (:value o)})
        ops    (->> kept (mapcat (fn [[i c]] (if c [i c] [i]))) (sort-by :index) (map plain) vec)
        tokens (m/rid-tokens (for [[_ c] kept :when (= :ok (:type c))]
                               (m/input (:f c) (:value c))))]
    [ops wl tokens (count kept)]))

(defn knossos-checker
  "Knossos's linear checker on one key's history with the write-once model;
  keys with more than limit calls are :unknown (skipped)."
  [limit]
  (reify checker/Checker
    (check [this test history opts]
      (let [[ops wl tokens n] (knossos-history (seq history))]
        (if (< limit n)
          {:valid? :unknown :skipped (str n " calls, more than --knossos-limit " limit)}
          (-> (checker/check (checker/linearizable
                               {:model     (->ClaimModel wl (m/initial wl) tokens)
                                :algorithm :linear})
                             test ops opts)
              (select-keys [:valid? :analyzer :op :previous-ok :last-op :final-paths])
              (assoc :workload wl :calls n)))))))

(defn per-key-knossos [limit]
  (independent/checker (knossos-checker limit)))

;; ---------------------------------------------------------------------------
;; Membership

(defn membership-checker
  "A retired id re-added must have been refused; counts membership ops."
  []
  (reify checker/Checker
    (check [this test history opts]
      (let [ops      (filter #(and (= :nemesis (:process %)) (= :info (:type %))
                                   (str/starts-with? (name (or (:f %) :x)) "member-")
                                   (map? (:value %)))
                             history)
            done     (filter #(not (:skipped (:value %))) ops)
            reused   (filter #(= :member-reuse-id (:f %)) done)
            accepted (filter #(false? (:refused? (:value %))) reused)]
        {:valid?           (empty? accepted)
         :ops              (frequencies (map :f done))
         :skipped          (frequencies (map :f (filter #(:skipped (:value %)) ops)))
         :reuse-refused    (count (filter #(true? (:refused? (:value %))) reused))
         :reuse-undecided  (count (filter #(nil? (:refused? (:value %))) reused))
         :reuse-accepted   (vec (take 5 accepted))}))))

(defn crash-checker
  "Crash and sanitizer patterns in the downloaded onced.log of every node."
  []
  (checker/log-file-pattern (str rules/crash-re) "onced.log"))
