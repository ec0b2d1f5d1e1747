;; Reads every .clj and .edn file under a directory as data, never as code:
;; *read-eval* is false (so #= is an error), nothing is evaluated or loaded.
;; Run by jepsen/clojure/check-syntax with Debian's clojure 1.11 only (no
;; Jepsen, no Maven); prints one line per file, then "N files read, N failed",
;; and exits 1 if any file failed.
;;
;; Checks per file: every form reads; a .clj under src/ or test/ starts with
;; an (ns NAME ...) form whose NAME matches its path (dashes are underscores
;; in file names), and has exactly one ns form.
(ns check-syntax
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str])
  (:import (clojure.lang LineNumberingPushbackReader)
           (java.io File)))

(def eof (Object.))

(defn rel [^File root ^File f]
  (str (.relativize (.toPath root) (.toPath f))))

(defn err-line
  "The line and column a reader exception names, else the reader's line."
  [e ^LineNumberingPushbackReader r]
  (let [d (ex-data e)]
    [(or (:clojure.error/line d) (:line d) (.getLineNumber r))
     (or (:clojure.error/column d) (:column d) (.getColumnNumber r))]))

(defn root-message [^Throwable e]
  (loop [e e]
    (if-let [c (.getCause e)] (recur c) (.getMessage e))))

(defn prepare-ns!
  "After an (ns NAME (:require [x :as a]) ...) form: make NAME the current
  namespace with the aliases it declares, so that ::a/kw reads as it would
  when the file is loaded. Only namespace objects are created; nothing is
  loaded."
  [form]
  (let [nsname (second form)
        the-ns (create-ns nsname)]
    (doseq [clause (drop 2 form)
            :when (and (seq? clause) (= :require (first clause)))
            spec (rest clause)
            :when (vector? spec)]
      ;; [a.b :as x :refer [...]], or the prefix form [a [b :as x] [c :as y]]
      (let [prefix? (and (symbol? (first spec)) (next spec) (not (keyword? (second spec))))
            specs   (if prefix?
                      (for [v (rest spec) :when (vector? v)]
                        (into [(symbol (str (first spec) "." (first v)))] (rest v)))
                      (when (symbol? (first spec)) [spec]))]
        (doseq [[lib & opts] specs
                :let [m (apply hash-map (if (even? (count opts)) opts (butlast opts)))]
                :when (symbol? (:as m))]
          (create-ns lib)
          (binding [*ns* the-ns] (alias (:as m) lib)))))
    the-ns))

(defn expected-ns
  "The ns name a file under src/ or test/ must declare, or nil."
  [rel-path]
  (when-let [[_ p] (re-matches #"(?:src|test)/(.+)\.clj" rel-path)]
    (-> p (str/replace "/" ".") (str/replace "_" "-") symbol)))

(defn check-clj [root ^File f]
  (with-open [r (LineNumberingPushbackReader. (io/reader f))]
    (let [path (rel root f)
          want (expected-ns path)]
      (binding [*read-eval* false
                *ns* (create-ns 'check-syntax.user)]
        (loop [n 0, nss []]
          (let [line (.getLineNumber r)
                form (try (read {:eof eof :read-cond :allow} r)
                          (catch Exception e
                            (let [[l c] (err-line e r)]
                              {::error (format "%s:%d:%d: %s" path l c (root-message e))})))]
            (cond
              (and (map? form) (::error form)) (::error form)
              (identical? form eof)
              (cond
                (and want (empty? nss))
                (format "%s:1:1: no ns form (expected (ns %s ...))" path want)
                (and want (not= [want] (map first nss)))
                (let [[nm l] (first nss)]
                  (if (not= nm want)
                    (format "%s:%d:1: ns %s does not match its path (expected %s)" path l nm want)
                    (format "%s:%d:1: more than one ns form" path (second (second nss)))))
                :else [:ok n])
              :else
              (let [ns-form? (and (seq? form) (= 'ns (first form)) (symbol? (second form)))]
                (if (and want (zero? n) (not ns-form?))
                  (format "%s:%d:1: the first form is not an ns form" path
                          (or (some-> form meta :line) line))
                  (do (when ns-form? (set! *ns* (prepare-ns! form)))
                      ;; the reader puts the line a list starts on in its meta
                      (recur (inc n) (if ns-form?
                                       (conj nss [(second form) (or (:line (meta form)) line)])
                                       nss))))))))))))

(defn check-edn [root ^File f]
  (with-open [r (LineNumberingPushbackReader. (io/reader f))]
    (let [path (rel root f)]
      (loop [n 0]
        (let [form (try (edn/read {:eof eof :default tagged-literal} r)
                        (catch Exception e
                          (let [[l c] (err-line e r)]
                            {::error (format "%s:%d:%d: %s" path l c (root-message e))})))]
          (cond (and (map? form) (::error form)) (::error form)
                (identical? form eof) [:ok n]
                :else (recur (inc n))))))))

(defn -main [dir]
  (let [root (.getCanonicalFile (io/file dir))
        base (.getParentFile (.getParentFile root))   ; the repository
        files (->> (file-seq root)
                   (filter #(.isFile ^File %))
                   (filter #(re-find #"\.(clj|edn)$" (.getName ^File %)))
                   (remove #(re-find #"/(target|store)/" (str %)))
                   (sort-by str))
        results (for [^File f files]
                  (let [r (try (if (str/ends-with? (.getName f) ".edn")
                                 (check-edn root f)
                                 (check-clj root f))
                               (catch Exception e
                                 (format "%s: %s" (rel root f) (root-message e))))]
                    (if (vector? r)
                      (do (println (format "ok   %s (%d forms)" (rel base f) (second r))) true)
                      (do (println (str "FAIL jepsen/clojure/" r)) false))))
        results (doall results)
        failed (count (remove true? results))]
    (println (format "%d files read, %d failed" (count results) failed))
    (System/exit (if (and (pos? (count results)) (zero? failed)) 0 1))))

(apply -main *command-line-args*)
