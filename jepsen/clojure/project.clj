;; NOT RUNNABLE HERE: this needs a host with Clojars access, Leiningen, a
;; JDK 17, the Jepsen 0.3.11 dependency set (project.clj) and five Debian 12
;; nodes over SSH; it has never run. Our machines only read it, compile it
;; against stubs and test its pure parts (jepsen/clojure/README.md).
(defproject once-jepsen "0.1.0-SNAPSHOT"
  :description "Jepsen tests for once: claims and idempotency records through
               partitions, crashes, pauses, clock faults and membership changes
               (jepsen/README.md)."
  :license {:name "the once project's license (see the repository)"}
  ;; Jepsen 0.3.11 is the last release built for Java 11+ (javac --release
  ;; 11), so it runs on Debian 12's JDK 17; 0.3.12 and later need JDK 21.
  ;; Knossos comes with it (0.3.15). JSON lines to oncectl: data.json.
  :dependencies [[org.clojure/clojure "1.12.4"]
                 [jepsen "0.3.11"]
                 [org.clojure/data.json "2.5.0"]]
  :main once.jepsen.core
  :source-paths ["src"]
  :test-paths ["test"]
  :jvm-opts ["-Xmx8g" "-Djava.awt.headless=true" "-server"]
  :repl-options {:init-ns once.jepsen.core})
