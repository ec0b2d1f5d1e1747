;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.db
  "Installs and runs onced on the DB nodes (docs/server.md).

  Layout on every node: /opt/once/bin/{onced,oncectl}, the data directory
  /var/lib/once/data (node-id, tombstone, Raft log, snapshots), the log
  /var/log/once/onced.log (stdout and stderr of every start, a
  `Jepsen starting ...` line before each), the pid file
  /var/run/once/onced.pid. Client address IP:7101, Raft address IP:7111,
  IPv4 literals as onced wants.

  Install: --tarball URL (file:// on the nodes, or http(s)), a tarball with
  one top directory holding bin/onced and bin/oncectl (README.md says how to
  make it), or --build-dir DIR: the control node's built onced and oncectl
  are uploaded. The runtime libraries come from Debian 12 (libraft2, libuv1,
  liburing2, libprotobuf-c1, libjansson4, libssl3, and libasan8/libubsan1
  for sanitizer builds).

  Setup: the first of the initial members starts with --bootstrap, the
  other initial members with --join (every initial member's client
  address; onced retries until one answers), and setup waits until each is
  a voter. Hosts beyond --initial-members are installed but not started:
  the membership nemesis grows into them. Every start after that is a plain
  restart (same data directory: same id), except the membership nemesis's
  fresh joins (wiped directory: a new random id). Processes are signalled by
  the PID in the pid file only."
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [control :as c]
                    [db :as db]
                    [util :as util]]
            [jepsen.control.util :as cu]
            [jepsen.os.debian :as debian]
            [once.jepsen.client :as oc]
            [clj-commons.slingshot :refer [try+]]))

(def dir "/opt/once")
(def bin (str dir "/bin/onced"))
(def remote-oncectl (str dir "/bin/oncectl"))
(def data-dir "/var/lib/once/data")
(def log-file "/var/log/once/onced.log")
(def pid-file "/var/run/once/onced.pid")

(def runtime-packages
  ["libraft2" "libuv1" "liburing2" "libprotobuf-c1" "libjansson4" "libssl3"
   "libasan8" "libubsan1" "iptables" "psmisc"])

(defn initial-members
  "The hosts that form the cluster at setup: the first --initial-members of
  the test's nodes."
  [test]
  (vec (take (:initial-members test (count (:nodes test))) (:nodes test))))

(defn onced-args
  "onced's flags for a start on node: bootstrap? (a new cluster) or join
  (client addresses to join through), else a plain restart."
  [test node {:keys [bootstrap? join]}]
  (concat ["--data-dir" data-dir
           "--raft-addr" (oc/raft-addr node)
           "--client-addr" (oc/client-addr node)
           "--election-timeout" (:election-timeout test "1s")
           "--heartbeat" (:heartbeat test "100ms")
           "--snapshot-threshold" (str (:snapshot-threshold test 64))
           "--snapshot-trailing" (str (:snapshot-trailing test 32))
           "--log-level" (:log-level test "info")]
          (when bootstrap? ["--bootstrap"])
          (when (seq join) ["--join" (str/join "," join)])))

(defn start-onced!
  "Starts onced on the current node (in a jepsen.control session) unless it
  is running."
  [test node opts]
  (c/su
    (c/exec :mkdir :-p (str/replace log-file #"/[^/]+$" "") (str/replace pid-file #"/[^/]+$" ""))
    (apply cu/start-daemon!
           {:logfile log-file
            :pidfile pid-file
            :chdir   dir
            :env     (cond-> {:ASAN_OPTIONS  "verify_asan_link_order=0"
                              :UBSAN_OPTIONS "print_stacktrace=1"}
                       ;; libraft traces when the variable is set at all
                       (:raft-trace test) (assoc :LIBRAFT_TRACE "1"))}
           bin
           (onced-args test node opts))))

(defn signal-onced!
  "Sends a signal to onced by the PID in its pid file (nothing if absent)."
  [sig]
  (c/su
    (try+ (c/exec :sh :-c (str "test -s " pid-file " && kill -" sig " $(cat " pid-file ") || true"))
          (catch Object _ nil))))

(defn kill-onced!
  "kill -9 by PID; removes the pid file."
  []
  (c/su (cu/stop-daemon! pid-file)))

(defn wipe!
  "Removes the data directory (a fresh id at the next start). Only after the
  node is stopped."
  []
  (c/su (c/exec :rm :-rf data-dir)))

(defn running? []
  (c/su (boolean (cu/daemon-running? pid-file))))

(defn await-voter
  "Polls `members list` through the given members until node is a voter;
  true, or false after timeout-s."
  [test node via timeout-s]
  (let [addr     (oc/client-addr node)
        deadline (+ (System/currentTimeMillis) (* 1000 timeout-s))]
    (loop []
      (let [ms (oc/members test via)]
        (cond
          (some #(and (= addr (:client-addr %)) (= "voter" (str/lower-case (str (:role %))))) ms) true
          (> (System/currentTimeMillis) deadline) false
          :else (do (Thread/sleep 500) (recur)))))))

(defn install!
  "Installs the runtime libraries and the binaries on the current node."
  [test node]
  (c/su
    (debian/install runtime-packages)
    (cond
      (:tarball test) (cu/install-archive! (:tarball test) dir)
      (:build-dir test)
      (do (c/exec :mkdir :-p (str dir "/bin"))
          (c/upload [(str (:build-dir test) "/onced") (str (:build-dir test) "/oncectl")]
                    (str dir "/bin/"))
          (c/exec :chmod :755 bin remote-oncectl))
      :else (throw (IllegalArgumentException. "give --tarball URL or --build-dir DIR")))
    (c/exec :test :-x bin)))

(defrecord DB []
  db/DB
  (setup! [this test node]
    ;; warm the memoized IP lookup while a session to the node is bound
    (oc/node-ip node)
    (install! test node)
    (kill-onced!)
    (wipe!)
    ;; an empty log on every node, so spares that never start have one too
    (c/su (c/exec :mkdir :-p (str/replace log-file #"/[^/]+$" ""))
          (c/exec :truncate :-s 0 log-file))
    (let [members (initial-members test)]
      (when (some #{node} members)
        (if (= node (first members))
          (start-onced! test node {:bootstrap? true})
          (start-onced! test node {:join (map oc/client-addr members)}))
        (when-not (await-voter test node members 120)
          (throw (ex-info (str node " did not become a voter within 120 s") {:node node}))))))

  (teardown! [this test node]
    (kill-onced!)
    (when-not (:leave-db-running? test)
      (wipe!)))

  db/Kill
  (kill! [this test node] (kill-onced!))
  (start! [this test node]
    ;; a plain restart (same data directory, same id) of members and
    ;; zombies only: spares and removed nodes stay down (the membership
    ;; nemesis keeps the states: once.jepsen.nemesis/initial-state)
    (if (#{:member :zombie} (get-in @(:membership test) [:nodes node :state] :member))
      (start-onced! test node {})
      :not-a-member))

  db/Pause
  (pause!  [this test node] (signal-onced! "STOP"))
  (resume! [this test node] (signal-onced! "CONT"))

  db/Primary
  (setup-primary! [this test node])
  (primaries [this test]
    (->> (:nodes test)
         (pmap (fn [n] (when (= "LEADER" (some-> (oc/status test n) :role str/upper-case)) n)))
         (remove nil?)))

  db/LogFiles
  (log-files [this test node]
    (c/su (c/exec :sh :-c (str "mkdir -p " data-dir "; tar czf /tmp/once-data.tar.gz --ignore-failed-read -C "
                               (str/replace data-dir #"/[^/]+$" "") " data 2>/dev/null || true")))
    {log-file "onced.log"
     "/tmp/once-data.tar.gz" "data.tar.gz"}))

(defn db [] (DB.))
