(ns once.jepsen.model
  "The sequential model of one record (docs/state-machine.md, for a record
  that lives the whole run), as pure step functions: once.jepsen.checker
  wraps them as Knossos models (write-once per key through
  jepsen.independent); test/once/jepsen/model_test.clj checks them against
  once.jepsen.rules by brute force. The model R1-R6 explain, without log
  time (the Python checker's verdict is the whole contract's model,
  jepsen/local/oncecheck/model.py).

  A step takes a state and an input map (see `input`) and returns the set of
  possible next states (empty: the op cannot happen in that state). Knossos
  wants a deterministic model, so the checker steps a *set* of states.

  NONCE (state: the accepted request id, or nil)
    claim r: nil -> ACCEPTED retry=false, state r; r -> ACCEPTED retry=true;
    w != r -> REPLAYED first_request_id w.
  IDEMPOTENT (state [status owner token attempt result error first used])
    claim r: absent -> ACCEPTED (attempt 1); PENDING owner r -> ACCEPTED
    retry (same token); PENDING owner != r -> IN_PROGRESS, or an ACCEPTED
    takeover (attempt + 1, new token: the lease may have expired, log time is
    not in the history); RELEASED -> ACCEPTED takeover; COMPLETED ->
    DUPLICATE with the stored result; FAILED -> FAILED.
    complete t x: absent -> NOT_FOUND; token != t -> NOT_OWNER; PENDING ->
    COMPLETED (stores x); COMPLETED with t -> COMPLETED retry.
    release t: absent -> NOT_FOUND; token != t -> NOT_OWNER; PENDING ->
    RELEASED, or FAILED if terminal; RELEASED -> RELEASED retry, or FAILED if
    terminal.
  An input without :outcome is a call whose answer is unknown (:info): it is
  stepped as taking effect (whether it did at all is the search's choice).
  An answer with retry=true may also be the call's own first application
  followed by libonce's internal retry. Outcomes outside the model (STALE,
  FUTURE, CONFLICT, ...) constrain nothing: `modeled?` is false for them and
  the checker leaves them out."
  (:require [clojure.string :as str]))

(def modeled
  {["claim" "NONCE"]         #{"ACCEPTED" "REPLAYED"}
   ["claim" "IDEMPOTENT"]    #{"ACCEPTED" "IN_PROGRESS" "DUPLICATE" "FAILED"}
   ["complete" "IDEMPOTENT"] #{"COMPLETED" "NOT_OWNER" "NOT_FOUND"}
   ["release" "IDEMPOTENT"]  #{"RELEASED" "FAILED" "NOT_OWNER" "NOT_FOUND"}})

(defn modeled?
  "Does an answer with this outcome constrain the model? (nil outcome: an
  :info call, which may have taken effect.)"
  [f workload outcome]
  (or (nil? outcome)
      (contains? (modeled [f (if (= "nonce" workload) "NONCE" "IDEMPOTENT")]) outcome)))

(defn- rpt=
  "A reported field matches when it was not reported or is equal."
  [reported actual]
  (or (nil? reported) (= reported actual)))

;; ---------------------------------------------------------------------------
;; NONCE

(defn nonce-step
  "Next states of a NONCE record (nil or the accepted request id)."
  [s {:keys [rid outcome retry first-rid]}]
  (cond
    (nil? outcome)            (if (nil? s) #{rid} #{})
    (= "ACCEPTED" outcome)    (cond (not (rpt= first-rid rid)) #{}
                                    (not retry) (if (nil? s) #{rid} #{})
                                    (or (nil? s) (= s rid)) #{rid}
                                    :else #{})
    (= "REPLAYED" outcome)    (if (and (some? s) (not= s rid) (rpt= first-rid s)) #{s} #{})
    :else                     #{}))

;; ---------------------------------------------------------------------------
;; IDEMPOTENT

(def absent
  "[status owner token attempt result error first used-tokens]"
  [nil nil nil 0 nil nil nil #{}])

(defn- new-owner
  "States after claim r is accepted as a first claim or a takeover. token is
  the literal the answer reported, or nil (an :info claim): then a
  placeholder [:? r attempt] that matches any token an ACCEPTED answer of r
  reported. A literal token is never given twice (used)."
  [[st owner _tok att _res _err first used] r token]
  (let [[token used] (cond (nil? token)      [[:? r (inc att)] used]
                           (contains? used token) [nil used]
                           :else             [token (conj used token)])]
    (cond
      (nil? token) #{}
      (nil? st) #{["PENDING" r token 1 nil nil r used]}
      (or (and (= "PENDING" st) (not= owner r)) (= "RELEASED" st))
      #{["PENDING" r token (inc att) nil nil first used]}
      :else #{})))

(defn tok-match?
  "Does the state's token match t? A placeholder matches the tokens the
  ACCEPTED answers of its request id reported (rid-tokens)."
  [state-tok t rid-tokens]
  (or (= state-tok t)
      (and (vector? state-tok) (= :? (first state-tok))
           (contains? (get rid-tokens (second state-tok) #{}) t))))

(defn idem-step
  "Next states of an IDEMPOTENT record. rid-tokens: request id -> the tokens
  its ACCEPTED answers reported (from the history)."
  [s {:keys [f rid outcome retry first-rid token attempt res-result arg-result terminal]}
   rid-tokens]
  (let [[st owner tok att res err first used] s
        o outcome]
    (case f
      "claim"
      (cond
        (nil? o) (new-owner s rid nil)
        (= "ACCEPTED" o)
        (let [cands (cond-> (vec (new-owner s rid token))
                      (and retry (= "PENDING" st) (= owner rid))
                      (conj (if (and token (vector? tok) (tok-match? tok token rid-tokens))
                              [st owner token att res err first used]
                              s)))]
          (set (filter (fn [[_ _ ntok natt _ _ nfirst]]
                         (and (rpt= token ntok) (rpt= attempt natt) (rpt= first-rid nfirst)))
                       cands)))
        (= "IN_PROGRESS" o) (if (and (= "PENDING" st) (not= owner rid) (rpt= first-rid first)) #{s} #{})
        (= "DUPLICATE" o)   (if (and (= "COMPLETED" st) (rpt= res-result res) (rpt= first-rid first)) #{s} #{})
        (= "FAILED" o)      (if (and (= "FAILED" st) (rpt= first-rid first)) #{s} #{})
        :else #{})

      "complete"
      (let [x    arg-result
            done ["COMPLETED" owner tok att x err first used]
            mine (tok-match? tok token rid-tokens)]
        (cond
          (nil? o) (if (and (= "PENDING" st) mine) #{done} #{})
          (= "COMPLETED" o)
          (let [out (cond-> #{}
                      (and (= "PENDING" st) mine (rpt= res-result x)) (conj done)
                      (and retry (= "COMPLETED" st) mine (rpt= res-result res)) (conj s))]
            (if retry out (if (= "PENDING" st) out #{})))
          (= "NOT_OWNER" o) (if (and (some? st) (not mine)) #{s} #{})
          (= "NOT_FOUND" o) (if (nil? st) #{s} #{})
          :else #{}))

      "release"
      (let [n    (if terminal
                   ["FAILED" owner tok att res nil first used]
                   ["RELEASED" owner tok att res err first used])
            mine (tok-match? tok token rid-tokens)
            can  (and mine (or (= "PENDING" st) (and (= "RELEASED" st) terminal)))]
        (cond
          (nil? o) (if can #{n} #{})
          (#{"RELEASED" "FAILED"} o)
          (if (not= (= "FAILED" o) (boolean terminal))
            #{}
            (cond-> #{}
              can (conj n)
              (and mine (= st o)) (conj s)))
          (= "NOT_OWNER" o) (if (and (some? st) (not mine)) #{s} #{})
          (= "NOT_FOUND" o) (if (nil? st) #{s} #{})
          :else #{}))

      #{})))

;; ---------------------------------------------------------------------------
;; Inputs

(defn- sf [v] (cond (nil? v) nil (keyword? v) (name v) :else (str v)))

(defn- bf [v] (if (string? v) (= "true" (str/lower-case v)) (boolean v)))

(defn- lf [v] (cond (integer? v) (long v)
                    (string? v) (try (Long/parseLong v) (catch NumberFormatException _ nil))
                    :else nil))

(defn input
  "The step input of a Knossos op: f, and a value as once.jepsen.client
  records it (oncectl's fields, `-` keys; an :ok completion's value carries
  the invocation's fields too and the sent result as :arg-result-b64; an
  :info op is stepped with its invocation's value, which has no :outcome)."
  [f v]
  (let [o (some-> (sf (:outcome v)) str/upper-case)]
    {:f          (sf f)
     :rid        (sf (:request-id v))
     :outcome    o
     :retry      (bf (:retry v))
     :first-rid  (sf (:first-request-id v))
     :token      (sf (:owner-token v))
     :attempt    (lf (:owner-attempt v))
     :res-result (when o (sf (:result-b64 v)))
     :arg-result (or (sf (:arg-result-b64 v))
                     (when (nil? o) (sf (:result-b64 v)))
                     (when (= "complete" (sf f)) ""))
     :terminal   (bf (:terminal v))}))

(defn call-input
  "The step input of a once.jepsen.rules call (for the brute-force tests)."
  [c]
  {:f (:f c) :rid (:rid c) :outcome (when (= "ok" (:type c)) (:outcome c))
   :retry (:retry c) :first-rid (:first-rid c) :token (:token c) :attempt (:attempt c)
   :res-result (:res-result c) :arg-result (:arg-result c) :terminal (:terminal c)})

(defn step-set
  "Steps a set of states; the set of next states (empty: inconsistent)."
  [workload states in rid-tokens]
  (set (mapcat (fn [s] (if (= "nonce" workload)
                         (nonce-step s in)
                         (idem-step s in rid-tokens)))
               states)))

(defn initial [workload] (if (= "nonce" workload) #{nil} #{absent}))

(defn rid-tokens
  "request id -> the tokens its ACCEPTED claim answers reported, from step
  inputs of :ok calls."
  [inputs]
  (reduce (fn [m {:keys [f outcome rid token]}]
            (if (and (= "claim" f) (= "ACCEPTED" outcome) token)
              (update m rid (fnil conj #{}) token)
              m))
          {} inputs))
