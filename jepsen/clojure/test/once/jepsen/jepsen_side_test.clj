(ns once.jepsen.jepsen-side-test
  "Pure functions of the Jepsen-side namespaces: the session requests and
  completion shapes of the client (checked by the rules as the local
  runner's are), the history Knossos gets, the write-once model stepped as
  Knossos steps it, and the acceptance checker. Runs under `lein test`, and
  with Debian's clojure through test-rules, which compiles these namespaces
  against stubs (tools/stub_compile.clj; tuples are MapEntries as in
  jepsen.independent)."
  (:require [clojure.test :refer [deftest is testing]]
            [jepsen.independent :as independent]
            [knossos.model :as knossos]
            [once.jepsen.acceptance :as acceptance]
            [once.jepsen.checker :as ochecker]
            [once.jepsen.client :as oc]
            [once.jepsen.model :as m]
            [once.jepsen.rules :as r]))

(deftest requests
  (testing "a NONCE claim: only oncectl's fields, `_` names, the record key from the tuple"
    (is (= {"cmd" "claim" "timeout" "2s" "scope" "s" "key" "n-1" "request_id" "ab"}
           (oc/request :claim "n-1" {:scope "s" :request-id "ab" :kind "NONCE" :final true
                                     :node "x" :step :1-accept}
                       "2s"))))
  (testing "an IDEMPOTENT claim sets idempotent, payload_hash and lease"
    (is (= {"cmd" "claim" "timeout" "2s" "scope" "p" "key" "o-1" "request_id" "cd"
            "idempotent" true "payload_hash" "0a0b" "lease" "3s"}
           (oc/request :claim "o-1" {:scope "p" :request-id "cd" :kind "IDEMPOTENT"
                                     :payload-hash "0a0b" :lease "3s"}
                       "2s"))))
  (testing "complete and release"
    (is (= {"cmd" "complete" "timeout" "1s" "scope" "p" "key" "o-1" "request_id" "ef"
            "owner_token" "1:5:0" "result_b64" "eA=="}
           (oc/request :complete "o-1" {:scope "p" :request-id "ef" :owner-token "1:5:0"
                                        :result-b64 "eA=="}
                       "1s")))
    (is (= {"cmd" "release" "timeout" "1s" "scope" "p" "key" "o-1" "request_id" "ef"
            "owner_token" "1:5:0" "terminal" true "error" "declined"}
           (oc/request :release "o-1" {:scope "p" :request-id "ef" :owner-token "1:5:0"
                                       :terminal true :error "declined"}
                       "1s")))))

(deftest classification
  (is (= :ok (oc/classify {:outcome "ACCEPTED" :retry false})))
  (is (= :ok (oc/classify {:outcome "REPLAYED"})))
  (is (= :fail (oc/classify {:outcome "RESOURCE_EXHAUSTED" :error "RESOURCE_EXHAUSTED" :applied "false"})))
  (is (= :fail (oc/classify {:error "UNAVAILABLE" :applied "false"})))
  (is (= :info (oc/classify {:error "UNKNOWN" :applied "unknown"})))
  (is (= :info (oc/classify {:error "HARNESS"}))))

(deftest durations
  (is (= [1 2 600 3600 60] (map oc/duration-s ["250ms" "2s" "10m" "1h" "bogus"]))))

(defn- client-ops
  "An invocation and the client's completion of it, as Jepsen records them."
  [p f k inv answer]
  (let [addr "n1:7101"]
    [{:index (* 2 p) :type :invoke :process p :f f :value (independent/tuple k inv)}
     {:index (inc (* 2 p)) :type (oc/classify answer) :process p :f f
      :value (independent/tuple k (oc/completion-value f inv answer addr))}]))

(deftest completions-check-like-the-local-runner
  (let [acc  (client-ops 0 :claim "o-1" {:scope "p" :request-id "a" :kind "IDEMPOTENT"}
                         {:outcome "ACCEPTED" :retry false :request-id "a" :first-request-id "a"
                          :owner-token "1:5:0" :owner-attempt 1 :first-index 5})
        done (client-ops 1 :complete "o-1" {:scope "p" :request-id "b" :owner-token "1:5:0"
                                            :result-b64 "eA=="}
                         {:outcome "COMPLETED" :retry false :request-id "b" :owner-token "1:5:0"
                          :result-b64 "eA=="})
        dup  (client-ops 2 :claim "o-1" {:scope "p" :request-id "c" :kind "IDEMPOTENT"}
                         {:outcome "DUPLICATE" :retry false :request-id "c" :first-request-id "a"
                          :result-b64 "eA==" :first-index 5})
        bad  (client-ops 3 :claim "o-1" {:scope "p" :request-id "d" :kind "IDEMPOTENT"}
                         {:outcome "DUPLICATE" :retry false :request-id "d" :first-request-id "a"
                          :result-b64 "eQ==" :first-index 5})
        fenced (client-ops 4 :complete "o-1" {:scope "p" :request-id "e" :owner-token "9:9:9"
                                              :result-b64 "eQ=="}
                           {:outcome "NOT_OWNER" :retry false :request-id "e"})]
    (is (:valid? (r/check-history (concat acc done dup))))
    (testing "the sent result is kept apart from the stored one"
      (is (= "eQ==" (:arg-result-b64 (val (:value (second fenced))))))
      (is (nil? (:result-b64 (val (:value (second fenced)))))))
    (testing "a DUPLICATE with another result is R6"
      (is (contains? (set (map :name (:anomalies (r/check-history (concat acc done bad)))))
                     :duplicate-result)))))

(deftest knossos-history-and-model
  (let [h   [{:index 0 :type :invoke :process 0 :f :claim :value {:request-id "a" :kind "NONCE"}}
             {:index 1 :type :invoke :process 1 :f :claim :value {:request-id "b" :kind "NONCE"}}
             {:index 2 :type :info :process :nemesis :f :start-partition :value :one}
             {:index 3 :type :ok :process 0 :f :claim
              :value {:request-id "a" :kind "NONCE" :outcome "ACCEPTED" :retry false :first-request-id "a"}}
             {:index 4 :type :fail :process 1 :f :claim
              :value {:request-id "b" :error "UNAVAILABLE" :applied "false"}}
             {:index 5 :type :invoke :process 2 :f :claim :value {:request-id "c" :kind "NONCE"}}
             {:index 6 :type :ok :process 2 :f :claim :value {:request-id "c" :outcome "STALE"}}
             {:index 7 :type :invoke :process 3 :f :claim :value {:request-id "d" :kind "NONCE"}}
             {:index 8 :type :info :process 3 :f :claim :value {:request-id "d" :error "UNKNOWN"}}
             {:index 9 :type :invoke :process 4 :f :claim :value {:request-id "e" :kind "NONCE"}}
             {:index 10 :type :ok :process 4 :f :claim
              :value {:request-id "e" :outcome "REPLAYED" :first-request-id "a"}}]
        [ops wl _tokens n] (ochecker/knossos-history h)]
    (is (= "nonce" wl))
    (is (= 3 n) ":fail and unmodeled (STALE) calls are left out, :info kept")
    (is (= [0 3 7 8 9 10] (map :index ops)))
    (testing "the model as Knossos steps it: an :ok op with its completion's value"
      (let [model (ochecker/->ClaimModel "nonce" (m/initial "nonce") {})
            s1    (knossos/step model {:f :claim :value (:value (nth h 3))})
            s2    (knossos/step s1 {:f :claim :value (:value (nth h 10))})]
        (is (= #{"a"} (:states s1)))
        (is (= #{"a"} (:states s2)))))))

(deftest acceptance-steps
  ;; IPv4 literals as node names: they resolve to themselves with the real
  ;; jepsen.control.net/ip too
  (let [nodes ["10.0.0.1" "10.0.0.2" "10.0.0.3" "10.0.0.4" "10.0.0.5"]
        [n1 n2 n3 n4 n5] nodes
        r0    "r0"
        op    (fn [i step node outcome & {:as extra}]
                [{:index (* 2 i) :type :invoke :process i :f :claim
                  :value (independent/tuple "N-0" {:request-id (str "q" i) :step step})}
                 {:index (inc (* 2 i)) :type (if outcome :ok :info) :process i :f :claim
                  :value (independent/tuple "N-0" (merge {:request-id (str "q" i) :step step
                                                          :node (str node ":7101")}
                                                         (when outcome {:outcome outcome})
                                                         extra))}])
        replay (fn [i step node] (op i step node "REPLAYED" :first-request-id r0))
        good  (concat (op 0 :1-accept n1 "ACCEPTED" :request-id r0)
                      (replay 1 :2-replay n2) (replay 2 :2-replay n3)
                      (op 3 :3-zombie n1 nil)
                      (replay 4 :3-replay n2) (replay 5 :3-replay n3)
                      (replay 6 :4-replay n4) (replay 7 :4-replay n2) (replay 8 :4-replay n3)
                      (replay 9 :5-replay n5) (replay 10 :5-replay n1)
                      (replay 11 :6-replay n1) (replay 12 :6-replay n4) (replay 13 :6-replay n5)
                      (replay 14 :7-replay n1) (replay 15 :7-replay n4) (replay 16 :7-replay n5))]
    (is (= [] (acceptance/check-steps good r0 nodes)))
    (is (seq (acceptance/check-steps (concat good (op 20 :3-zombie n1 "ACCEPTED")) r0 nodes))
        "an ACCEPTED via the zombie fails the sequence")
    (is (seq (acceptance/check-steps (remove #(= 13 (:process %)) good) r0 nodes))
        "a member that never answered a replay fails it")))
