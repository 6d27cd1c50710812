import OStackTestSupport
import SodiumKit
import Testing

@testable import OStackCore

/// ObjectStack's filter conformance tables (`Tests/Conformance/`) against ostack's local evaluator and
/// its query path on a real SQLCipher mirror: every case must give exactly the server's rows, so that
/// `records list --local` never answers differently from the server. The same tables run against the
/// dev server over HTTP in `DevServerContractTests` and through the binary in `EndToEndTests`.
@Suite struct ConformanceTests {
    static let tables = (try? Conformance.filterTables()) ?? []

    @Test func theTablesAreThere() throws {
        let tables = try Conformance.filterTables()
        #expect(tables.map(\.name).count == 6)
        #expect(tables.reduce(0) { $0 + $1.cases.count } >= 120)
        _ = try Conformance.pagination()
    }

    /// The filter a case gives, parsed as `--filter-json` is, or the refusal it must be.
    func parse(_ testCase: Conformance.Case) throws -> FilterCondition? {
        let json = try #require(JSONValue.parse(Array(testCase.filter.utf8)), "\(testCase.name)")
        do {
            let condition = try FilterCondition.parse(json)
            if case .refused = testCase.verdict { Issue.record("accepted, must be refused: \(testCase.name)") }
            return condition
        } catch {
            guard case .refused(let mentions) = testCase.verdict else {
                Issue.record("refused, must be accepted: \(testCase.name): \(error)")
                return nil
            }
            #expect(error.code == .invalidFilter, "\(testCase.name)")
            let message = error.context.suggestion?.rendered(spellingCommands: { "\($0)" }) ?? ""
            for mention in mentions {
                #expect(message.contains(mention), "\(testCase.name): '\(message)' does not name \(mention)")
            }
            return nil
        }
    }

    @Test(arguments: tables)
    func localEvaluator(_ table: Conformance.Table) throws {
        let rows = try table.rows.map { try #require(JSONValue.parse(Array($0.utf8))) }
        for testCase in table.cases {
            guard let condition = try parse(testCase) else { continue }
            let filter = LocalFilter(condition, fieldTypes: table.fieldTypes)
            let ids = rows.filter { filter.matches($0) }.compactMap { $0["id"]?.stringValue }.sorted()
            // The byte scanner (what the SQL function uses) must agree with the decoded value.
            let viaBytes = zip(table.rows, rows).filter { text, _ in
                Array(text.utf8).withUnsafeBytes { filter.matches($0) }
            }.compactMap { $0.1["id"]?.stringValue }.sorted()
            #expect(viaBytes == ids, "\(table.name): \(testCase.name)")
            if case .rows(let expected) = testCase.verdict {
                #expect(ids == expected, "\(table.name): \(testCase.name)")
            }
        }
    }

    /// The path of `records list --local`: `LocalStore.query` on an encrypted mirror, with the field
    /// types the metadata gives.
    @Test(arguments: tables)
    func localQueryPath(_ table: Conformance.Table) throws {
        let directory = TemporaryDirectory()
        let database = try AccountDatabase.open(
            path: directory.appending("account.db"), key: AccountDataKey(SecretBytes(randomCount: 32)))
        let store = try LocalStore(database: database)
        try store.transaction { () throws(OStackError) in
            for (index, row) in table.rows.enumerated() {
                guard let record = JSONValue.parse(Array(row.utf8)) else { continue }
                try store.putRecord(table.object, record, version: "v\(index)")
            }
        }
        for testCase in table.cases {
            guard let condition = try parse(testCase) else { continue }
            let result = try store.query(
                .init(object: table.object, filter: condition, fieldTypes: table.fieldTypes))
            let ids = result.records.compactMap { JSONValue.parse($0)?["id"]?.stringValue }.sorted()
            #expect(result.total == ids.count)
            if case .rows(let expected) = testCase.verdict {
                #expect(ids == expected, "\(table.name): \(testCase.name)")
            }
        }
    }

    /// Paged local reads visit every row exactly once, whatever the ties in the sort keys.
    @Test func localPagination() throws {
        let pagination = try Conformance.pagination()
        let directory = TemporaryDirectory()
        let database = try AccountDatabase.open(
            path: directory.appending("account.db"), key: AccountDataKey(SecretBytes(randomCount: 32)))
        let store = try LocalStore(database: database)
        try store.transaction { () throws(OStackError) in
            for (index, row) in pagination.table.rows.enumerated() {
                guard let record = JSONValue.parse(Array(row.utf8)) else { continue }
                try store.putRecord("conf_page", record, version: "v\(index)")
            }
        }
        let all = pagination.table.ids.sorted()
        for page in pagination.pages {
            let sort = page.orderBy.map { SortKey(field: $0.field, descending: $0.descending) }
            var seen: [String] = []
            var offset = 0
            while offset < all.count + page.pageSize {
                let result = try store.query(
                    .init(object: "conf_page", sort: sort, limit: page.pageSize, offset: offset))
                seen += result.records.compactMap { JSONValue.parse($0)?["id"]?.stringValue }
                offset += page.pageSize
            }
            #expect(seen.count == all.count, "\(page.name)")
            #expect(seen.sorted() == all, "\(page.name)")
        }
        for limit in pagination.limits {
            let result = try store.query(.init(object: "conf_page", limit: limit.limit, offset: limit.offset ?? 0))
            #expect(result.records.count == limit.expectedRowCount, "\(limit.name)")
        }
    }
}

extension Conformance.Table: CustomTestStringConvertible {
    public var testDescription: String { name }
}
