import Foundation

/// ObjectStack's own filter conformance tables, as JSON test data in `Tests/Conformance/` (see its
/// README for provenance), loaded for the suites that hold ostack's local filter, its query path and
/// the dev server to them.
public enum Conformance {
    /// One case: a filter (JSON text, in either wire form) and what it must do.
    public struct Case: Sendable {
        public enum Verdict: Sendable, Equatable {
            /// Evaluated, matching exactly these ids (sorted).
            case rows([String])
            /// Refused as an invalid filter whose message names each of these strings.
            case refused(mustMention: [String])
            /// Accepted and evaluated; which rows match is another table's subject.
            case compiles
        }

        public var name: String
        public var filter: String
        public var verdict: Verdict
    }

    /// A fixture and its cases. `object` is the dev server's object for it (`--conformance-objects`).
    public struct Table: Sendable {
        public var name: String
        public var object: String
        public var fieldTypes: [String: String]
        /// Each row as a JSON object text, in the table's insertion order.
        public var rows: [String]
        public var ids: [String]
        public var cases: [Case]
    }

    public struct PageCase: Sendable {
        public var name: String
        /// `(field, descending)`; empty for an unordered read.
        public var orderBy: [(field: String, descending: Bool)]
        public var pageSize: Int
    }

    public struct LimitCase: Sendable {
        public var name: String
        public var limit: Int?
        public var offset: Int?
        public var expectedRowCount: Int
    }

    public struct Pagination: Sendable {
        public var table: Table
        public var pages: [PageCase]
        public var limits: [LimitCase]
    }

    /// `<repository>/Tests/Conformance`.
    public static var directory: String {
        let file = #filePath  // <repo>/Sources/OStackTestSupport/Conformance.swift
        var parts = file.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/") + "/Tests/Conformance"
    }

    /// Every filter table: logic, temporal (datetime/date), time of day, text, comparand types, and
    /// cross-field comparisons.
    public static func filterTables() throws -> [Table] {
        let logic = try load("filter-logic-conformance.json")
        let temporal = try load("temporal-conformance.json")
        let text = try load("filter-text-conformance.json")
        let comparand = try load("filter-comparand-type-conformance.json")
        let cross = try load("cross-field-conformance.json")
        let logicFields = ["a", "b", "c", "d", "owner", "status", "parent_object", "parent_id"]
        return [
            try table(
                "filter-logic", "conf_logic", Dictionary(uniqueKeysWithValues: logicFields.map { ($0, "text") }),
                logic["FILTER_LOGIC_ROWS"], logic["FILTER_LOGIC_CASES"]),
            try table(
                "temporal", "conf_temporal", ["at": "datetime", "on": "date"], temporal["TEMPORAL_ROWS"],
                temporal["TEMPORAL_CASES"]),
            try table(
                "temporal-time", "conf_time", ["at": "time"], temporal["TEMPORAL_TIME_ROWS"],
                temporal["TEMPORAL_TIME_CASES"]),
            try table(
                "filter-text", "conf_text", ["name": "text"], text["FILTER_TEXT_ROWS"], text["FILTER_TEXT_CASES"]),
            try table(
                "filter-comparand-type", "conf_comparand",
                ["qty": "number", "label": "text", "active": "boolean", "note": "text"],
                comparand["FILTER_COMPARAND_TYPE_ROWS"], comparand["FILTER_COMPARAND_TYPE_CASES"]),
            try table(
                "cross-field", "conf_cross", cross["CROSS_FIELD_FIELDS"] as? [String: String] ?? [:],
                cross["CROSS_FIELD_ROWS"], cross["CROSS_FIELD_CASES"]),
        ]
    }

    public static func pagination() throws -> Pagination {
        let json = try load("pagination-conformance.json")
        let table = try table(
            "pagination", "conf_page", ["status": "text", "rank": "number", "name": "text"], json["PAGINATION_ROWS"],
            [Any]())
        var pages: [PageCase] = []
        for raw in (json["PAGINATION_CASES"] as? [[String: Any]] ?? [])
            + (json["PAGINATION_UNORDERED_CASES"] as? [[String: Any]] ?? [])
        {
            let orderBy = (raw["orderBy"] as? [[String: Any]] ?? []).map {
                (field: $0["field"] as? String ?? "", descending: $0["order"] as? String == "desc")
            }
            pages.append(
                PageCase(name: raw["name"] as? String ?? "", orderBy: orderBy, pageSize: raw["pageSize"] as? Int ?? 1))
        }
        let limits = (json["PAGINATION_ZERO_LIMIT_CASES"] as? [[String: Any]] ?? []).map { raw in
            let query = raw["query"] as? [String: Any] ?? [:]
            return LimitCase(
                name: raw["name"] as? String ?? "", limit: query["limit"] as? Int, offset: query["offset"] as? Int,
                expectedRowCount: raw["expectedRowCount"] as? Int ?? -1)
        }
        guard !pages.isEmpty, !limits.isEmpty else { throw Malformed(file: "pagination-conformance.json") }
        return Pagination(table: table, pages: pages, limits: limits)
    }

    struct Malformed: Error, CustomStringConvertible {
        var file: String
        var description: String { "malformed conformance table \(file)" }
    }

    static func load(_ file: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file))
        guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Malformed(file: file)
        }
        return json
    }

    static func text(_ value: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    static func table(
        _ name: String, _ object: String, _ types: [String: String], _ rows: Any?, _ cases: Any?
    ) throws -> Table {
        guard let rows = rows as? [[String: Any]], !rows.isEmpty, let cases = cases as? [[String: Any]] else {
            throw Malformed(file: name)
        }
        let parsed = try cases.map { raw -> Case in
            guard let caseName = raw["name"] as? String, let filter = raw["filter"] else { throw Malformed(file: name) }
            let verdict: Case.Verdict
            if raw["expectRejection"] as? Bool == true || raw["verdict"] as? String == "door-refusal" {
                verdict = .refused(mustMention: raw["mustMention"] as? [String] ?? [])
            } else if raw["verdict"] as? String == "compiles" {
                verdict = .compiles
            } else {
                guard let expected = raw["expected"] as? [String] else { throw Malformed(file: name) }
                verdict = .rows(expected.sorted())
            }
            return Case(name: caseName, filter: try text(filter), verdict: verdict)
        }
        return Table(
            name: name, object: object, fieldTypes: types, rows: try rows.map { try text($0) },
            ids: rows.compactMap { $0["id"] as? String }, cases: parsed)
    }
}
