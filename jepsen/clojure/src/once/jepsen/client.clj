;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.client
  "Talking to once through oncectl (docs/oncectl.md): a long-running
  `oncectl --json session` per worker (JSON lines on stdin/stdout), and
  one-shot `oncectl --json ...` calls for the nemeses and the DB.

  oncectl runs on the control node (`--oncectl PATH`, default `oncectl` on
  PATH) and reaches each node's client address over the network; with
  `--client-via ssh` it runs on the DB node instead, through the ssh binary
  with the test's SSH options (for a control node that cannot run the
  Debian 12 build). Either way a worker's session is bound to one node's
  client address, which that node forwards to the leader, exactly as
  jepsen/local/run does, and ops have its shapes: the invocation's value is
  what was sent (:scope :key :request-id :kind ...), the completion's value
  is the invocation's fields with every field oncectl answered merged over
  them (`_` -> `-`), plus :node. Completion types follow the answer's
  `applied` field: an outcome -> :ok; applied \"false\" -> :fail;
  \"unknown\", no answer within the harness timeout, a dead session or a
  malformed line -> :info (then the session is killed and a new one
  started)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [client :as client]
                    [independent :as independent]
                    [store :as store]]
            [jepsen.control.net :as cn])
  (:import (java.io BufferedReader BufferedWriter InputStreamReader OutputStreamWriter)
           (java.util.concurrent LinkedBlockingQueue TimeUnit)))

(def client-port 7101)
(def raft-port 7111)

(defn node-ip
  "A node's IPv4 address (oncectl and onced take IPv4 literals only).
  Memoized; resolved on the control node, else through the node's getent."
  [node]
  (cn/ip node))

(defn client-addr [node] (str (node-ip node) ":" client-port))
(defn raft-addr [node] (str (node-ip node) ":" raft-port))

(defn- json-key [k] (keyword (str/replace k "_" "-")))

(defn parse-answer
  "An oncectl JSON line as a map with `-` keyword keys; nil if it is not a
  JSON object."
  [line]
  (try (let [m (json/read-str line :key-fn json-key)]
         (when (map? m) m))
       (catch Exception _ nil)))

;; ---------------------------------------------------------------------------
;; How to run oncectl

(defn duration-s
  "Whole seconds (rounded up) of an oncectl duration: 250ms, 5s, 10m, 1h."
  [d]
  (let [[_ n u] (re-matches #"(\d+)(ms|s|m|h)" (str d))
        n (if n (Long/parseLong n) 60)]
    (case u "ms" (quot (+ n 999) 1000) "s" n "m" (* 60 n) "h" (* 3600 n) 60)))

(defn- ssh-command
  "The ssh argv prefix that runs a command on node with the test's SSH
  options."
  [test node]
  (let [ssh (:ssh test)]
    (concat ["ssh" "-o" "BatchMode=yes"
             "-o" (str "StrictHostKeyChecking=" (if (:strict-host-key-checking ssh) "yes" "no"))]
            (when-let [k (:private-key-path ssh)] ["-i" k])
            (when-let [p (:port ssh)] ["-p" (str p)])
            [(str (or (:username ssh) "root") "@" node)])))

(defn- sh-quote [s] (str "'" (str/replace (str s) "'" "'\\''") "'"))

(defn oncectl-argv
  "The argv that runs `oncectl ARGS` for node (local binary, or through ssh
  on the node with --client-via ssh)."
  [test node args]
  (if (= :ssh (:client-via test))
    (concat (ssh-command test node)
            [(str/join " " (map sh-quote (cons (:remote-oncectl test) args)))])
    (cons (:oncectl test "oncectl") args)))

(defn ctl!
  "One `oncectl --cluster ADDRS --json --timeout T ARGS` call from the
  control node's point of view (node picks where it runs with --client-via
  ssh). Returns the answer map (with :exit), or {:error \"HARNESS\"
  :applied \"unknown\" :message ...} when it printed no JSON object."
  ([test node addrs args] (ctl! test node addrs args "5s"))
  ([test node addrs args timeout]
   (let [argv (oncectl-argv test node (concat ["--cluster" (str/join "," addrs) "--json"
                                               "--timeout" timeout] args))
         pb   (doto (ProcessBuilder. ^java.util.List (vec argv))
                (.redirectErrorStream false))
         p    (.start pb)]
     (.close (.getOutputStream p))
     (let [out  (future (slurp (.getInputStream p)))
           err  (future (slurp (.getErrorStream p)))
           ;; oncectl's own deadline bounds the call; this only guards a hung ssh
           done (.waitFor p (+ 30 (* 2 (duration-s timeout))) TimeUnit/SECONDS)]
       (when-not done (.destroyForcibly p))
       (let [line (last (str/split-lines (str (deref out 5000 ""))))
             m    (when line (parse-answer line))]
         (if m
           (assoc m :exit (when done (.exitValue p)))
           {:error "HARNESS" :applied "unknown"
            :message (str "oncectl " (str/join " " args) ": no JSON answer"
                          (when-not done " (killed after a wall-clock timeout)")
                          "; stderr: " (str/trim (str (deref err 1000 ""))))}))))))

;; ---------------------------------------------------------------------------
;; Sessions

(defrecord Session [^Process proc ^BufferedWriter in ^LinkedBlockingQueue lines next-id addr])

(defn open-session
  "Starts `oncectl --cluster ADDR --json --timeout T session` for node, with
  a reader thread that queues its stdout lines (:eof at the end)."
  [test node]
  (let [addr  (client-addr node)
        argv  (oncectl-argv test node ["--cluster" addr "--json"
                                       "--timeout" (:call-timeout test "2s") "session"])
        pb    (ProcessBuilder. ^java.util.List (vec argv))
        log   (try (store/path! test "sessions.log") (catch Exception _ (io/file "/dev/null")))
        _     (.redirectError pb (java.lang.ProcessBuilder$Redirect/appendTo log))
        p     (.start pb)
        q     (LinkedBlockingQueue.)
        rd    (BufferedReader. (InputStreamReader. (.getInputStream p) "UTF-8"))]
    (doto (Thread. ^Runnable (fn []
                               (try (loop []
                                      (when-let [l (.readLine rd)]
                                        (.put q l)
                                        (recur)))
                                    (catch java.io.IOException _ nil)
                                    (finally (.put q :eof))))
                   (str "oncectl session " addr))
      (.setDaemon true)
      (.start))
    (->Session p (BufferedWriter. (OutputStreamWriter. (.getOutputStream p) "UTF-8"))
               q (atom 0) addr)))

(defn close-session!
  "Ends a session: EOF on stdin, then SIGKILL of its process (by its Process
  handle) if it has not exited within 5 s."
  [^Session s]
  (when s
    (try (.close ^BufferedWriter (:in s)) (catch java.io.IOException _ nil))
    (let [^Process p (:proc s)]
      (when-not (.waitFor p 5 TimeUnit/SECONDS)
        (.destroyForcibly p)
        (.waitFor p 5 TimeUnit/SECONDS)))))

(defn kill-session! [^Session s]
  (when s
    (let [^Process p (:proc s)]
      (.destroyForcibly p)
      (.waitFor p 5 TimeUnit/SECONDS))))

(defn call!
  "Sends one request (a map with string-able keys, `_` names as oncectl
  wants) and returns its answer map; throws ex-info ::lost on EOF, a line
  that is not a JSON object, or no answer within timeout-ms (the caller
  kills the session). Answers to older requests (given up on) are skipped."
  [^Session s req timeout-ms]
  (let [id (swap! (:next-id s) inc)
        ^BufferedWriter w (:in s)]
    (try (.write w (json/write-str (assoc req "id" id)))
         (.newLine w)
         (.flush w)
         (catch java.io.IOException e
           (throw (ex-info (str "write: " (.getMessage e)) {:type ::lost}))))
    (let [deadline (+ (System/nanoTime) (* 1000000 (long timeout-ms)))]
      (loop []
        (let [left (quot (- deadline (System/nanoTime)) 1000000)
              l    (when (pos? left) (.poll ^LinkedBlockingQueue (:lines s) left TimeUnit/MILLISECONDS))]
          (cond
            (nil? l)    (throw (ex-info (str "no answer in " timeout-ms " ms") {:type ::lost}))
            (= :eof l)  (throw (ex-info "session ended" {:type ::lost}))
            :else
            (let [m (parse-answer l)]
              (cond (nil? m) (throw (ex-info (str "not a JSON object: " (subs l 0 (min 200 (count l))))
                                             {:type ::lost}))
                    (= id (:id m)) (dissoc m :id :exit)
                    :else (recur)))))))))

;; ---------------------------------------------------------------------------
;; Ops <-> requests

(defn- req-key [k] (str/replace (name k) "-" "_"))

(def request-fields
  "Fields of an op's value that go to oncectl (docs/oncectl.md, Session)."
  {:claim    [:scope :key :request-id :execution-id :ttl :ts :window :idempotent
              :payload-hash :lease]
   :complete [:scope :key :request-id :owner-token :result-b64]
   :release  [:scope :key :request-id :owner-token :terminal :error]})

(defn request
  "The session request for a client op's value (a map; the tuple's key is
  the record key)."
  [f k v call-timeout]
  (let [v (cond-> (assoc v :key (str k))
            (= "IDEMPOTENT" (:kind v)) (assoc :idempotent true))]
    (into {"cmd" (name f) "timeout" call-timeout}
          (for [field (request-fields f)
                :let [x (get v field)]
                :when (some? x)]
            [(req-key field) (if (keyword? x) (name x) x)]))))

(defn classify
  "The completion type of an answer, by its `applied` field."
  [answer]
  (cond (and (:outcome answer) (not (:error answer))) :ok
        (= "false" (:applied answer))                  :fail
        :else                                          :info))

(defn completion-value
  "The completion's value: the invocation's fields, then the answer's, then
  :node. For a complete, :result-b64 is the stored result the cluster
  returned (absent when it returned none) and :arg-result-b64 the result
  sent, so a checker can tell them apart."
  [f inv answer addr]
  (let [v (merge inv (dissoc answer :exit :id) {:node addr})]
    (if (= :complete f)
      (cond-> (assoc (dissoc v :result-b64) :arg-result-b64 (:result-b64 inv ""))
        (:result-b64 answer) (assoc :result-b64 (:result-b64 answer)))
      v)))

(defrecord Client [node session]
  client/Client
  (open! [this test node]
    (assoc this :node node :session (atom nil)))

  (setup! [this test])

  (invoke! [this test op]
    (let [[k v]   (if (independent/tuple? (:value op))
                    [(key (:value op)) (val (:value op))]
                    [(:key (:value op)) (:value op)])
          addr    (client-addr node)
          s       (or @session (reset! session (open-session test node)))
          wrap    (fn [x] (if (independent/tuple? (:value op)) (independent/tuple k x) x))]
      (try
        (let [answer (call! s (request (:f op) k v (:call-timeout test "2s"))
                            (:harness-timeout-ms test 6000))]
          (assoc op
                 :type  (classify answer)
                 :value (wrap (completion-value (:f op) v answer addr))))
        (catch clojure.lang.ExceptionInfo e
          (if (= ::lost (:type (ex-data e)))
            (do (kill-session! s)
                (reset! session nil)
                (assoc op :type :info
                       :value (wrap (merge v {:error "HARNESS" :applied "unknown" :node addr
                                              :message (.getMessage e)}))))
            (throw e))))))

  (teardown! [this test])

  (close! [this test]
    (when session
      (close-session! @session)
      (reset! session nil)))

  client/Reusable
  ;; One session serves the worker across process changes after an :info;
  ;; a lost session is replaced inside invoke!.
  (reusable? [this test] true))

(defn client [] (->Client nil nil))

;; ---------------------------------------------------------------------------
;; Status of a node (for samplers, primaries, membership)

(defn status
  "One node's own status (never forwarded), or nil."
  [test node]
  (let [m (ctl! test node [(client-addr node)] ["status" "--node" (client-addr node)] "1s")]
    (when (and (:outcome m) (not (:error m))) m)))

(defn members
  "The member directory from the leader, through any of the given nodes:
  [{:id :raft-addr :client-addr :role :reachable}], or nil."
  [test nodes]
  (when (seq nodes)
    (let [m (ctl! test (first nodes) (map client-addr nodes) ["members" "list"] "3s")]
      (when (and (= "OK" (:outcome m)) (sequential? (:members m)))
        (:members m)))))
