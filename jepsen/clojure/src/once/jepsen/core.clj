;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(ns once.jepsen.core
  "The command line (jepsen.cli) and the test map: `lein run test ...` runs
  one test, `lein run test-all ...` the matrix of workloads x nemeses,
  `lein run serve` the results browser. README.md has the options and how
  to run against 5 Debian 12 nodes."
  (:gen-class)
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [checker :as checker]
                    [cli :as cli]
                    [generator :as gen]
                    [tests :as tests]]
            [jepsen.os.debian :as debian]
            [once.jepsen.acceptance :as acceptance]
            [once.jepsen.checker :as ochecker]
            [once.jepsen.client :as oc]
            [once.jepsen.db :as odb]
            [once.jepsen.idempotent :as idempotent]
            [once.jepsen.nemesis :as on]
            [once.jepsen.nonce :as nonce]))

(def workloads
  "Workload name -> (fn [test] {:generator :final-generator :scope :keys ...})."
  {:nonce      nonce/workload
   :idempotent idempotent/workload
   :acceptance acceptance/workload})

(def all-faults #{:partition :kill :pause :packet :clock :member})

(def nemesis-matrix
  "test-all's nemesis combinations (the CI mixes first)."
  [#{:partition :kill} #{:member :partition} #{:member :pause :kill} #{:clock :member :partition}
   #{:partition} #{:kill} #{:pause} #{:member} #{:packet} #{}
   #{:partition :kill :pause :member :packet :clock}])

(defn parse-faults
  "\"partition,kill\" -> #{:partition :kill}; \"none\" -> #{}; \"all\"."
  [s]
  (let [xs (map keyword (remove str/blank? (str/split (str s) #",")))]
    (cond (= [:none] xs) #{}
          (= [:all] xs)  all-faults
          :else          (set xs))))

(defn once-test
  "The test map for parsed CLI options."
  [opts]
  (let [faults   (:nemesis opts)
        wl-name  (:workload opts)
        test     (merge tests/noop-test
                        opts
                        {:os             debian/os
                         :db             (odb/db)
                         :client         (oc/client)
                         :remote-oncectl odb/remote-oncectl
                         :harness-timeout-ms 6000
                         :membership     (atom nil)
                         ;; the membership atom stays out of test.fressian
                         :nonserializable-keys [:membership]})
        test     (assoc test :initial-members (:initial-members opts
                                                            (if (= :acceptance wl-name) 3 (count (:nodes opts)))))
        _        (reset! (:membership test) (on/initial-state test))
        wl       ((workloads wl-name) test)
        pkg      (on/package {:db (:db test) :faults faults :interval (:nemesis-interval opts)
                              :extra-packages (when (= :acceptance wl-name) [(acceptance/package opts)])})
        members  (fn [] (or (:voters (on/refresh! test)) (on/member-nodes test)))
        main     (if (= :acceptance wl-name)
                   ;; the scripted sequence; faults asked for with --nemesis run
                   ;; beside it for --time-limit seconds
                   (gen/any (:generator wl)
                            (gen/time-limit (:time-limit opts)
                                            (gen/nemesis (gen/phases (gen/sleep 5) (:generator pkg)))))
                   (->> (gen/clients (:generator wl))
                        (gen/nemesis (gen/phases (gen/sleep 5) (:generator pkg)))
                        (gen/time-limit (:time-limit opts))))]
    (assoc test
           :name      (str "once-" (name wl-name) "-"
                           (if (seq faults) (str/join "," (map name (sort faults))) "none")
                           (when (= :acceptance wl-name) (str "-" (name (:acceptance-variant opts)))))
           :nemesis   (:nemesis pkg)
           :scope     (:scope wl)
           :generator (gen/phases
                        main
                        (gen/log "Healing: stop faults, restart nodes, restore membership")
                        (gen/nemesis (:final-generator pkg))
                        (gen/sleep 10)
                        (gen/nemesis {:type :info :f :final-phase})
                        (gen/log "Final probes: every key through every member")
                        ((:final-generator wl) members)
                        (gen/sleep 2))
           :checker   (checker/compose
                        (cond-> {:claims     (ochecker/claims-checker)
                                 :knossos    (ochecker/per-key-knossos (:knossos-limit opts))
                                 :membership (ochecker/membership-checker)
                                 :crash      (ochecker/crash-checker)
                                 :perf       (checker/perf {:nemeses (:perf pkg)})
                                 :exceptions (checker/unhandled-exceptions)}
                          (= :acceptance wl-name) (assoc :acceptance (acceptance/checker (:r0 wl)))))
           :plot      {:nemeses (:perf pkg)})))

(def cli-opts
  "Options beyond jepsen.cli's (README.md lists them all)."
  [[nil "--concurrency NUMBER" "workers: a multiple of the node count (3n: one group revisits old keys, two burst new ones)"
    :default  "3n"
    :validate [(partial re-find #"^\d+n?$") "Must be an integer, optionally followed by n."]]
   [nil "--workload NAME" "nonce, idempotent or acceptance"
    :default :nonce :parse-fn keyword :validate [workloads "unknown workload"]]
   [nil "--nemesis FAULTS" "comma list of partition,kill,pause,packet,clock,member; none; all"
    :default #{:partition :kill} :parse-fn parse-faults
    :validate [#(every? all-faults %) (str "faults are " (str/join "," (map name all-faults)))]]
   [nil "--nemesis-interval SECONDS" "mean seconds between nemesis ops"
    :default 5 :parse-fn #(Double/parseDouble %)]
   [nil "--rate OPS" "approximate client ops per second"
    :default 50 :parse-fn #(Double/parseDouble %)]
   [nil "--initial-members N" "hosts that form the cluster at setup (the rest are spares); default all (3 for acceptance)"
    :parse-fn #(Long/parseLong %)]
   [nil "--final-members N" "voters the final phase restores before the probes; default --initial-members"
    :parse-fn #(Long/parseLong %)]
   [nil "--tarball URL" "file:// (on the nodes) or http(s) tarball: one top directory with bin/onced, bin/oncectl"]
   [nil "--build-dir DIR" "or: upload DIR/onced and DIR/oncectl from the control node"]
   [nil "--oncectl PATH" "oncectl on the control node" :default "oncectl"]
   [nil "--client-via MODE" "local (oncectl on the control node) or ssh (on each DB node)"
    :default :local :parse-fn keyword :validate [#{:local :ssh} "local or ssh"]]
   [nil "--call-timeout DUR" "oncectl's deadline per call" :default "2s"]
   [nil "--lease DUR" "idempotent workload: the owner's lease (longer than --call-timeout)" :default "3s"]
   [nil "--election-timeout DUR" "onced --election-timeout" :default "1s"]
   [nil "--heartbeat DUR" "onced --heartbeat" :default "100ms"]
   [nil "--snapshot-threshold N" "onced --snapshot-threshold" :default 64 :parse-fn #(Long/parseLong %)]
   [nil "--snapshot-trailing N" "onced --snapshot-trailing" :default 32 :parse-fn #(Long/parseLong %)]
   [nil "--log-level LEVEL" "onced --log-level" :default "info"]
   [nil "--raft-trace" "run onced with LIBRAFT_TRACE=1" :default false]
   [nil "--acceptance-variant NAME" "follower, leader, kill-first or partition"
    :default :follower :parse-fn keyword
    :validate [#{:follower :leader :kill-first :partition} "follower, leader, kill-first or partition"]]
   [nil "--knossos-limit N" "Knossos checks keys with at most N calls" :default 200
    :parse-fn #(Long/parseLong %)]
   [nil "--safety-only" "report the final probes' and the cluster's liveness (R7 but lost-ack, R8) without failing on them" :default false]])

(defn validate-opts
  "Checks what jepsen.cli cannot: an install source, and a concurrency the
  workload can split into groups of one thread per node."
  [parsed]
  (let [o (:options parsed)
        n (count (:nodes o))
        c (:concurrency o)]
    (cond-> parsed
      (not (or (:tarball o) (:build-dir o)))
      (update :errors conj "give --tarball URL or --build-dir DIR")
      (and c (or (< c n) (pos? (mod c n))))
      (update :errors conj (str "--concurrency must be a multiple of the node count (" n "), e.g. 3n"))
      (and (= :acceptance (:workload o)) (< n 5))
      (update :errors conj "the acceptance workload needs 5 nodes"))))

(defn all-tests
  "test-all: every workload x the nemesis matrix (acceptance: each variant
  once, with no extra nemesis)."
  [opts]
  (concat
    (for [wl [:nonce :idempotent]
          faults nemesis-matrix]
      (once-test (assoc opts :workload wl :nemesis faults)))
    (for [v [:follower :leader :kill-first :partition]]
      (once-test (assoc opts :workload :acceptance :nemesis #{} :acceptance-variant v)))))

(defn -main [& args]
  (cli/run! (merge (cli/single-test-cmd {:test-fn  once-test
                                         :opt-spec cli-opts
                                         :opt-fn   validate-opts})
                   (cli/test-all-cmd {:tests-fn all-tests
                                      :opt-spec cli-opts
                                      :opt-fn   validate-opts})
                   (cli/serve-cmd))
            args))
