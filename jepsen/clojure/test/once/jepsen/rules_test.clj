(ns once.jepsen.rules-test
  "The pure checker (once.jepsen.rules) on the hand-written histories that
  jepsen/local/check is tested with (jepsen/local/tests/histories, each with
  its '; expect:' lines), plus a few Clojure-side forms. Runs with Debian's
  clojure alone: jepsen/clojure/test-rules."
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [once.jepsen.rules :as r]))

(def histories-dir
  "jepsen/local/tests/histories, from jepsen/clojure (test-rules cd's there)."
  (io/file (or (System/getProperty "once.histories") "../local/tests/histories")))

(defn read-edn-all
  "Every form of an EDN text: one op map a line (Jepsen's history.edn) or
  one vector of them. Tagged literals (#jepsen.history.Op{...}) give their
  form."
  [text]
  (with-open [rd (java.io.PushbackReader. (java.io.StringReader. text))]
    (let [eof (Object.)]
      (loop [out []]
        (let [f (edn/read {:eof eof :default (fn [_tag v] v)} rd)]
          (if (identical? f eof)
            (if (and (= 1 (count out)) (vector? (first out))) (first out) out)
            (recur (conj out f))))))))

(defn expectations [text]
  (map (comp str/trim second) (re-seq #"(?m)^; expect: (.*)$" text)))

(defn found
  "\"RULE name\" of every anomaly (warnings too, as jepsen/local/check prints
  them)."
  [res]
  (set (map #(str (:rule %) " " (name (:name %))) (:anomalies res))))

(defn fatal-found
  "\"RULE name\" of every fatal anomaly."
  [res]
  (set (map #(str (:rule %) " " (name (:name %))) (filter :fatal? (:anomalies res)))))

(deftest shared-histories
  ;; Each history's '; expect:' lines are exactly the fatal anomalies
  ;; reported. LIN (jepsen/local's brute-force search) has no port here
  ;; (the Jepsen side runs Knossos): a history that only LIN fails must
  ;; pass every rule.
  ;; time-*.edn exercise the time rules R20-R25 (jepsen/local/oncecheck/
  ;; timerules.py), which this port does not implement: the Clojure suite has
  ;; no time workload (jepsen/README.md, "Checker rules").
  (let [files (->> (.listFiles histories-dir)
                   (filter #(str/ends-with? (.getName %) ".edn"))
                   (remove #(str/starts-with? (.getName %) "time-"))
                   (sort-by #(.getName %)))]
    (is (< 40 (count files)) (str "histories in " histories-dir))
    (doseq [f files]
      (testing (.getName f)
        (let [text (slurp f)
              exp  (expectations text)
              want (set (remove #(str/starts-with? % "LIN ") exp))
              res  (r/check-history (read-edn-all text))]
          (is (seq exp) "no '; expect:' line")
          (if (or (= ["valid"] exp) (empty? want))
            (is (:valid? res) (str/join "\n" (r/summary res)))
            (do (is (not (:valid? res)) "expected invalid")
                (is (= want (fatal-found res))
                    (str "expected " (sort want) "; found " (str/join "\n" (r/summary res)))))))))))

(defn claim
  "An invocation and its completion for the history builders below."
  [p rid inv-extra ret-type ret]
  [{:type :invoke :process p :f :claim
    :value (merge {:scope "s" :key "k" :request-id rid :node "n1"} inv-extra)}
   (when ret-type {:type ret-type :process p :f :claim :value ret})])

(defn history [& ops] (vec (remove nil? (apply concat ops))))

(deftest independent-tuples-and-records
  (testing "jepsen.independent [k v] values with the key alone, scope in the value"
    (let [h [{:type :invoke :process 0 :f :claim
              :value ["n-1" {:scope "run" :request-id "a" :node "10.0.0.1:7101"}]}
             {:type :ok :process 0 :f :claim
              :value ["n-1" {:scope "run" :request-id "a" :outcome "ACCEPTED" :retry false
                             :first-request-id "a"}]}
             {:type :invoke :process 1 :f :claim :value ["n-1" {:scope "run" :request-id "b"}]}
             {:type :ok :process 1 :f :claim
              :value ["n-1" {:scope "run" :request-id "b" :outcome "ACCEPTED" :retry false
                             :first-request-id "b"}]}]
          res (r/check-history h)]
      (is (not (:valid? res)))
      (is (contains? (found res) "R1 double-accept"))
      (is (= ["run" "n-1"] (:key (first (:anomalies res))))))))

(deftest retries-and-replays
  (testing "a client retry (same request id) ACCEPTED retry=true after an :info is one op"
    (is (:valid? (r/check-history
                   (history (claim 0 "a" {} :info {:error "DEADLINE_EXCEEDED" :applied "unknown"})
                            (claim 5 "a" {} :ok {:outcome "ACCEPTED" :retry true :first-request-id "a"})
                            (claim 1 "b" {} :ok {:outcome "REPLAYED" :first-request-id "a"}))))))
  (testing "a replay (fresh request id) that is ACCEPTED after a completed ACCEPT"
    (let [res (r/check-history
                (history (claim 0 "a" {} :ok {:outcome "ACCEPTED" :retry false :first-request-id "a"})
                         (claim 1 "b" {} :ok {:outcome "ACCEPTED" :retry false :first-request-id "b"})))]
      (is (contains? (found res) "R1 double-accept"))))
  (testing "a :fail call never took effect: a DENY naming it is R3"
    (let [res (r/check-history
                (history (claim 0 "a" {} :fail {:error "UNAVAILABLE" :applied "false"})
                         (claim 1 "b" {} :ok {:outcome "REPLAYED" :first-request-id "a"})))]
      (is (contains? (found res) "R5 failed-op-took-effect"))))
  (testing "an :info winner acknowledged later by a REPLAYED is fine"
    (is (:valid? (r/check-history
                   (history (claim 0 "a" {} :info {:applied "unknown"})
                            (claim 1 "b" {} :ok {:outcome "REPLAYED" :first-request-id "a"}))))))
  (testing "a DENY acknowledged before its winner was invoked is R4"
    (let [h   [{:type :invoke :process 1 :f :claim :value {:scope "s" :key "k" :request-id "b"}}
               {:type :ok :process 1 :f :claim :value {:outcome "REPLAYED" :first-request-id "a"}}
               {:type :invoke :process 0 :f :claim :value {:scope "s" :key "k" :request-id "a"}}
               {:type :info :process 0 :f :claim :value {:applied "unknown"}}]
          res (r/check-history h)]
      (is (contains? (found res) "R4 real-time")))))

(deftest unreadable-histories
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"without an invocation"
                        (r/check-history [{:type :ok :process 0 :f :claim :value {:key "k"}}])))
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"still open"
                        (r/check-history [{:type :invoke :process 0 :f :claim :value {:key "k"}}
                                          {:type :invoke :process 0 :f :claim :value {:key "k"}}])))
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"valid :type"
                        (r/check-history [{:type :bogus :process 0}]))))

(deftest crash-logs
  (let [f (java.io.File/createTempFile "once-node" ".log")]
    (try
      (spit f "ts=1 level=info msg=\"started\"\n==7==ERROR: AddressSanitizer: heap-use-after-free\n")
      (let [h   (history (claim 0 "a" {} :ok {:outcome "ACCEPTED" :retry false :first-request-id "a"}))
            res (r/check-history h [] {:log-files [(str f)]})]
        (is (contains? (found res) "R8 crash-in-log"))
        (spit f "ts=1 level=info msg=\"started\"\n")
        (is (:valid? (r/check-history h [] {:log-files [(str f)]}))))
      (finally (.delete f)))))

(deftest safety-only
  (let [text (slurp (io/file histories-dir "fail-R7-missing-final-probe.edn"))]
    (is (not (:valid? (r/check-history (read-edn-all text)))))
    (is (:valid? (r/check-history (read-edn-all text) [] {:safety-only? true})))))
