;; Compiles the suite's namespaces with Debian's clojure 1.11 against stubs
;; of the libraries it cannot fetch here (Jepsen, Knossos, data.json,
;; tools.logging, slingshot): every external var the code names becomes a
;; function that throws if called, and the protocols the code implements
;; get their real method names and arities. Loading a namespace then checks
;; what reading cannot: every symbol resolves, special forms and bindings
;; are well formed, defrecord/reify methods match their protocols, arities
;; of our own functions are consistent. It cannot check that the real
;; libraries have the vars the stubs invent, nor their arities: that part is
;; only verified with Clojars access (`lein check`, README.md).
;;
;; Usage (from jepsen/clojure): ./check-compile; test-rules loads it with
;; -Dstub.noexit=1 to test pure functions of the Jepsen-side namespaces.
(ns stub-compile
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.walk :as walk]))

(def protocols
  "The external protocols the suite implements, with their methods."
  '{jepsen.generator {Generator [(update [gen test ctx event]) (op [gen test ctx])]}
    jepsen.nemesis   {Nemesis    [(setup! [n test]) (invoke! [n test op]) (teardown! [n test])]
                      Reflection [(fs [n])]}
    jepsen.client    {Client   [(open! [c test node]) (setup! [c test]) (invoke! [c test op])
                                (teardown! [c test]) (close! [c test])]
                      Reusable [(reusable? [c test])]}
    jepsen.db        {DB       [(setup! [db test node]) (teardown! [db test node])]
                      Kill     [(kill! [db test node]) (start! [db test node])]
                      Pause    [(pause! [db test node]) (resume! [db test node])]
                      Primary  [(setup-primary! [db test node]) (primaries [db test])]
                      LogFiles [(log-files [db test node])]}
    jepsen.checker   {Checker [(check [c test history opts])]}
    knossos.model    {Model [(step [m op])]}})

(def fakes
  "Stubs that behave like the real thing, for the pure functions that
  test-rules exercises with stubs (jepsen.independent's tuples are
  MapEntries)."
  {'jepsen.independent {'tuple  (fn [k v] (clojure.lang.MapEntry/create k v))
                        'tuple? map-entry?}
   ;; host names stand for their addresses in the tests
   'jepsen.control.net {'ip identity}})

(def macros
  "External macros whose arguments are not plain expressions."
  '{clj-commons.slingshot {try+ true}})

(defn external? [lib]
  (let [s (str lib)]
    (not (or (str/starts-with? s "once.")
             (and (str/starts-with? s "clojure.")
                  (not (#{"clojure.tools.logging" "clojure.data.json"} s)))))))

(defn libspecs
  "[lib alias refers] of an ns form's :require clause, prefix lists expanded."
  [ns-form]
  (for [clause (drop 2 ns-form)
        :when (and (seq? clause) (= :require (first clause)))
        spec (rest clause)
        :when (vector? spec)
        [lib & opts] (if (and (next spec) (not (keyword? (second spec))))
                       (for [v (rest spec) :when (vector? v)]
                         (into [(symbol (str (first spec) "." (first v)))] (rest v)))
                       [spec])
        :let [m (apply hash-map opts)]]
    [lib (:as m) (:refer m)]))

(defn read-forms [f]
  (binding [*read-eval* false]
    (with-open [r (java.io.PushbackReader. (io/reader f))]
      (let [eof (Object.)]
        (loop [out []]
          (let [x (read {:eof eof} r)]
            (if (identical? x eof) out (recur (conj out x)))))))))

(defn symbols [forms]
  (let [acc (transient #{})]
    (walk/postwalk (fn [x] (when (symbol? x) (conj! acc x)) x) forms)
    (persistent! acc)))

(defn stub-lib!
  "Creates lib (if needed), marks it loaded, and interns names in it."
  [lib names]
  (let [new?   (nil? (find-ns lib))
        the-ns (create-ns lib)]
    (dosync (commute @#'clojure.core/*loaded-libs* conj lib))
    (when new? (binding [*ns* the-ns] (refer-clojure :exclude '[update])))
    (when-let [ps (get protocols lib)]
      (binding [*ns* the-ns]
        (doseq [[pname methods] ps :when (not ((ns-interns the-ns) pname))]
          (doseq [[m] methods] (ns-unmap the-ns m))
          (eval (list* 'defprotocol pname methods)))))
    (doseq [n names
            :when (not ((ns-interns the-ns) n))]
      ;; a stub named like a clojure.core var (rand/long) replaces the refer
      (ns-unmap the-ns n)
      (if (get-in macros [lib n])
        (binding [*ns* the-ns]
          (eval '(defmacro try+ [& body]
                   `(try ~@(map (fn [f] (if (and (seq? f) (= 'catch (first f)))
                                          (list* 'catch 'Throwable (drop 2 f))
                                          f))
                                body)))))
        (intern the-ns (with-meta n {:stub true})
                (or (get-in fakes [lib n])
                    (fn [& _] (throw (UnsupportedOperationException. (str "stub " lib "/" n))))))))))

(defn prepare!
  "Stubs every external var the files name."
  [files]
  (doseq [f files
          :let [forms (read-forms f)
                nsf   (first forms)
                specs (libspecs nsf)
                syms  (symbols (rest forms))]]
    (doseq [[lib alias refers] specs :when (external? lib)]
      (stub-lib! lib (concat (for [s syms :when (= (str alias) (namespace s))] (symbol (name s)))
                             (when (sequential? refers) refers))))))

(defn prepare-all!
  "Stubs for every file under src and test (for test-rules)."
  []
  (prepare! (->> (concat (file-seq (io/file "src")) (file-seq (io/file "test")))
                 (filter #(str/ends-with? (str %) ".clj")))))

(defn list-stubs []
  (doseq [[lib m] (sort-by (comp str key) (into {} (for [n (all-ns) :let [vs (filter #(:stub (meta (key %))) (ns-interns n))] :when (seq vs)] [(ns-name n) (sort (map key vs))])))]
    (println lib (str/join " " m))))

(defn -main []
  (let [files (->> (file-seq (io/file "src")) (filter #(str/ends-with? (str %) ".clj")) (sort-by str))
        order (fn [f] (let [nm (second (first (read-forms f)))] nm))]
    (prepare! files)
    (let [results (doall
                    (for [f files]
                      (let [nm (order f)]
                        (try (require nm)
                             (println "ok  " (str f))
                             true
                             (catch Throwable e
                               (println "FAIL" (str f) ":"
                                        (loop [e e] (if-let [c (.getCause e)]
                                                      (if (instance? clojure.lang.Compiler$CompilerException e)
                                                        (str (.getMessage e) " -- " (.getMessage c))
                                                        (recur c))
                                                      (.getMessage e))))
                               false)))))]
      (when (System/getenv "STUB_LIST") (list-stubs))
      (println (format "%d namespaces compiled against stubs, %d failed"
                       (count results) (count (remove true? results))))
      (System/exit (if (every? true? results) 0 1)))))

(when-not (System/getProperty "stub.noexit")
  (-main))
