@testable import DevServerCore
import Testing

@Suite struct FilterTests {
    let store = DataStore()

    init() {
        for body in [
            #"{"title":"Alpha","status":"open","amount":10,"done":false,"due_date":"2026-01-10"}"#,
            #"{"title":"Beta","status":"done","amount":250.5,"done":true}"#,
            #"{"title":"gamma ray","status":"in_progress","amount":1000,"owner":"u2","due_date":"2026-03-01"}"#,
        ] {
            _ = store.create(object: "task", body: Array(body.utf8), userId: "usr_test")
        }
    }

    func titles(_ filter: String, extra: [(String, String)] = []) -> [String] {
        let response = store.list(object: "task", query: [("filter", filter), ("sort", "title")] + extra)
        return response.body?["records"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? [
            "HTTP \(response.status)"
        ]
    }

    @Test(arguments: [
        (#"["status","=","open"]"#, ["Alpha"]),
        (#"["status","eq","open"]"#, ["Alpha"]),
        (#"["status","EQUALS","open"]"#, ["Alpha"]),
        (#"["status","!=","open"]"#, ["Beta", "gamma ray"]),
        (#"["amount",">",10]"#, ["Beta", "gamma ray"]),
        (#"["amount","gte",250.5]"#, ["Beta", "gamma ray"]),
        (#"["amount","<",250.5]"#, ["Alpha"]),
        (#"["amount","lte",10]"#, ["Alpha"]),
        (#"["status","in",["open","done"]]"#, ["Alpha", "Beta"]),
        (#"["status","not_in",["open","done"]]"#, ["gamma ray"]),
        (#"["title","contains","amm"]"#, ["gamma ray"]),
        (#"["title","contains","AMM"]"#, []),
        (#"["title","icontains","AMM"]"#, ["gamma ray"]),
        (#"["title","notcontains","a"]"#, []),
        (#"["title","startswith","Al"]"#, ["Alpha"]),
        (#"["title","ends_with","ta"]"#, ["Beta"]),
        (#"["title","like","%ray"]"#, ["gamma ray"]),
        (#"["title","ilike","ALP%"]"#, ["Alpha"]),
        (#"["amount","between",[10,300]]"#, ["Alpha", "Beta"]),
        (#"["owner","is_null"]"#, ["Alpha", "Beta"]),
        (#"["owner","isnotnull"]"#, ["gamma ray"]),
        (#"["due_date","<","2026-02-01"]"#, ["Alpha"]),
        (#"["and",["status","!=","done"],["amount",">",5]]"#, ["Alpha", "gamma ray"]),
        (#"["OR",["status","=","done"],["title","=","Alpha"]]"#, ["Alpha", "Beta"]),
        (#"[["done","=",false],["amount","<",100]]"#, ["Alpha"]),
        (#"{"status":"open"}"#, ["Alpha"]),
        (#"{"amount":{"$gt":100,"$lt":500}}"#, ["Beta"]),
        (#"{"$or":[{"status":"done"},{"due_date":{"$lt":"2026-02-01"}}]}"#, ["Alpha", "Beta"]),
        (#"{"$and":[]}"#, ["Alpha", "Beta", "gamma ray"]),
        (#"{"$or":[]}"#, []),
        (#"{"owner":{"$ne":"u2"}}"#, ["Alpha", "Beta"]),
        (#"{"owner":{"$nin":["u2"]}}"#, ["Alpha", "Beta"]),
        (#"{"owner":{"$notContains":"u"}}"#, ["Alpha", "Beta"]),
        (#"{"owner":null}"#, ["Alpha", "Beta"]),
        (#"{"title":{"$like":"gamma\\_ray"}}"#, []),
        (#"{"title":{"$like":"gamma_ray"}}"#, ["gamma ray"]),
        (#"{"$not":{"owner":"u2"}}"#, ["Alpha", "Beta"]),
        (#"{"owner":{"$null":true}}"#, ["Alpha", "Beta"]),
        (#"{"owner":{"$exists":true}}"#, ["gamma ray"]),
        (#"{"amount":{"$gt":{"$field":"estimate"}}}"#, []),
    ])
    func operatorsFollowServerSemantics(filter: String, expected: [String]) {
        #expect(titles(filter) == expected, "\(filter)")
    }

    @Test(arguments: [
        #"["status","~","open"]"#, #"["status","in","open"]"#, #"["amount","between",[1]]"#, #"{"status":{}}"#,
        #"{"$nope":[]}"#, "not json", #"[]"#, #"["and"]"#, #"{"title":{"$regex":"a.*"}}"#,
        #"{"title":{"$options":"i"}}"#, #"{"title":{"$icontains":""}}"#, #"{"title":{"$icontains":1}}"#,
        #"{"title":{"$like":"a\\"}}"#,
    ])
    func malformedFiltersAreInvalid(filter: String) {
        let response = store.list(object: "task", query: [("filter", filter)])
        #expect(response.status == 400)
        #expect(response.body?["code"]?.stringValue == "INVALID_FILTER")
    }

    @Test func unknownFilterFieldIsInvalidField() {
        let response = store.list(object: "task", query: [("filter", #"["nope","=",1]"#)])
        #expect(response.body?["code"]?.stringValue == "INVALID_FIELD")
    }
}

@Suite struct ListQueryTests {
    let store = DataStore()

    init() {
        store.seed(object: "task", count: 25, userId: "usr_test")
    }

    @Test func pagingSortingSelectingAndCounting() {
        let page = store.list(object: "task", query: [("top", "10"), ("skip", "20"), ("select", "title")])
        #expect(page.body?["records"]?.arrayValue?.count == 5)
        #expect(page.body?["total"] == .number(25))
        #expect(page.body?["hasMore"] == .bool(false))
        #expect(page.body?["records"]?.arrayValue?.first?.objectValue?.map(\.0) == ["id", "title"])
        let noCount = store.list(object: "task", query: [("top", "10"), ("count", "false")])
        #expect(noCount.body?["total"] == nil)
        #expect(noCount.body?["hasMore"] == .bool(true))
        let sorted = store.list(object: "task", query: [("sort", "-title"), ("top", "1")])
        #expect(sorted.body?["records"]?.arrayValue?.first?["title"] == .string("Seed 9"))
        let all = store.list(object: "task", query: [])
        #expect(all.body?["records"]?.arrayValue?.count == 25)
    }

    @Test func implicitEqualityAndParameterRules() {
        #expect(store.list(object: "task", query: [("status", "done")]).body?["total"] == .number(8))
        #expect(store.list(object: "task", query: [("pageSize", "10")]).body?["code"] == .string("INVALID_FIELD"))
        #expect(
            store.list(object: "task", query: [("$expand2", "x")]).body?["error"]?["code"]
                == .string("UNSUPPORTED_QUERY_PARAM"))
        #expect(
            store.list(object: "task", query: [("top", "1"), ("limit", "2")]).body?["error"]?["code"]
                == .string("INVALID_REQUEST"))
        #expect(
            store.list(object: "task", query: [("filter", "[]"), ("filter", "[]")]).body?["error"]?["code"]
                == .string("INVALID_FILTER"))
        #expect(store.list(object: "task", query: [("sort", "title:desc")]).body?["code"] == .string("INVALID_SORT"))
        #expect(store.list(object: "task", query: [("sort", "nope")]).body?["code"] == .string("INVALID_SORT"))
        #expect(store.list(object: "task", query: [("select", "nope")]).body?["code"] == .string("INVALID_FIELD"))
        #expect(store.list(object: "nope", query: []).body?["code"] == .string("OBJECT_NOT_FOUND"))
    }

    @Test func postQueryBody() {
        let body =
            #"{"where":{"status":{"$in":["done"]}},"fields":["title"],"orderBy":[{"field":"title","order":"desc"}],"limit":2}"#
        let response = store.query(object: "task", body: Array(body.utf8))
        #expect(response.body?["records"]?.arrayValue?.count == 2)
        let mismatch = store.query(object: "task", body: Array(#"{"object":"project"}"#.utf8))
        #expect(mismatch.body?["code"] == .string("QUERY_OBJECT_MISMATCH"))
    }
}

@Suite struct WriteTests {
    let store = DataStore(batchCap: 5)

    func create(_ body: String) -> CoreResponse {
        store.create(object: "task", body: Array(body.utf8), userId: "usr_a")
    }

    @Test func createValidatesAndInjectsColumns() {
        let created = create(#"{"title":"T","created_by":"evil"}"#)
        #expect(created.status == 201)
        #expect(created.body?["record"]?["created_by"] == .string("usr_a"))
        #expect(created.body?["record"]?["status"] == .string("open"))
        #expect(created.headers.contains { $0.0 == "X-ObjectStack-Dropped-Fields" })
        let invalid = create(#"{"amount":1.234,"status":"nope","due_date":"tomorrow","done":"yes","nope":1}"#)
        #expect(invalid.status == 400)
        let codes = invalid.body?["fields"]?.arrayValue?.compactMap { $0["code"]?.stringValue } ?? []
        #expect(
            Set(codes) == [
                "required", "max_scale", "invalid_option", "invalid_date", "invalid_boolean", "unknown_field",
            ])
    }

    @Test func versionsIncreaseAndConflictsCarryTheCurrentRecord() {
        let id = create(#"{"title":"T"}"#).body!["id"]!.stringValue!
        let first = store.record(object: "task", id: id)!["updated_at"]!.stringValue!
        let updated = store.update(
            object: "task", id: id, body: Array(#"{"title":"U"}"#.utf8), ifMatch: "\"\(first)\"", userId: "usr_a")
        #expect(updated.status == 200)
        let second = updated.body!["record"]!["updated_at"]!.stringValue!
        #expect(second > first)
        let stale = store.update(
            object: "task", id: id, body: Array(#"{"title":"V"}"#.utf8), ifMatch: first, userId: "usr_a")
        #expect(stale.status == 409)
        #expect(stale.body?["code"] == .string("CONCURRENT_UPDATE"))
        #expect(stale.body?["currentVersion"] == .string(second))
        #expect(stale.body?["currentRecord"]?["title"] == .string("U"))
        // expectedVersion in the body wins over If-Match.
        let bodyWins = store.update(
            object: "task", id: id, body: Array(#"{"title":"W","expectedVersion":"\#(second)"}"#.utf8), ifMatch: first,
            userId: "usr_a")
        #expect(bodyWins.status == 200)
        #expect(
            store.update(object: "task", id: "nope", body: Array("{}".utf8), ifMatch: first, userId: "usr_a").status
                == 404)
        let staleDelete = store.delete(
            object: "task", id: id, ifMatch: nil, query: [("expectedVersion", first)], userId: "usr_a")
        #expect(staleDelete.status == 409)
        #expect(store.delete(object: "task", id: id, ifMatch: nil, query: [], userId: "usr_a").status == 200)
        #expect(store.get(object: "task", id: id, query: []).status == 404)
    }

    @Test func batchesHonourTheCapAtomicityAndVersions() {
        let tooMany = store.createMany(
            object: "task",
            body: Array(("[" + Array(repeating: #"{"title":"x"}"#, count: 6).joined(separator: ",") + "]").utf8),
            userId: "u")
        #expect(tooMany.status == 400)
        #expect(tooMany.body?["code"] == .string("BATCH_TOO_LARGE"))
        #expect(tooMany.body?["max"] == .number(5))
        let many = store.createMany(
            object: "task", body: Array(#"[{"title":"a"},{"title":"b","id":"tsk_client"}]"#.utf8), userId: "u")
        #expect(many.status == 201)
        #expect(many.body?["count"] == .number(2))
        #expect(store.record(object: "task", id: "tsk_client") != nil)
        let duplicate = create(#"{"title":"again","id":"tsk_client"}"#)
        #expect(duplicate.status == 409)
        let atomic = store.batch(
            object: "task",
            body: Array(
                #"{"operation":"update","records":[{"id":"tsk_client","data":{"title":"z"}},{"id":"missing","data":{"title":"y"}}],"options":{"atomic":true}}"#
                    .utf8), userId: "u")
        #expect(atomic.body?["succeeded"] == .number(0))
        #expect(store.record(object: "task", id: "tsk_client")?["title"] == .string("b"))
        let version = store.record(object: "task", id: "tsk_client")!["updated_at"]!.stringValue!
        let staleRow = Array(
            #"{"records":[{"id":"tsk_client","data":{"title":"c"},"expectedVersion":"2000-01-01T00:00:00.000Z"}]}"#.utf8
        )
        // By default the per-row version is stripped, as the real zod schema does: the update applies.
        let unconditional = store.updateMany(object: "task", body: staleRow, userId: "u")
        #expect(unconditional.body?["succeeded"] == .number(1))
        let current = store.record(object: "task", id: "tsk_client")!["updated_at"]!.stringValue!
        #expect(current != version)
        let conditional = store.updateMany(object: "task", body: staleRow, userId: "u", conditional: true)
        let error = conditional.body?["results"]?.arrayValue?.first?["errors"]?.arrayValue?.first
        #expect(error?["code"] == .string("CONCURRENT_UPDATE"))
        #expect(error?["currentVersion"] == .string(current))
        let deleted = store.deleteMany(object: "task", body: Array(#"{"ids":["tsk_client"]}"#.utf8), userId: "u")
        #expect(deleted.body?["succeeded"] == .number(1))
    }

    @Test func metadataHasAStrongETagAnd304() {
        let item = store.metaItem(type: "object", name: "task", ifNoneMatch: nil)
        let etag = item.headers.first { $0.0 == "ETag" }!.1
        #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
        #expect(item.body?["item"]?["fields"]?["title"]?["required"] == .bool(true))
        let cached = store.metaItem(type: "object", name: "task", ifNoneMatch: "W/\(etag)")
        #expect(cached.status == 304)
        #expect(cached.body == nil)
        #expect(store.metaItem(type: "objects", name: "nope", ifNoneMatch: nil).status == 404)
        #expect(store.metaItems(type: "object").body?["items"]?.arrayValue?.count == 4)  // task project contact note
    }
}

@Suite struct JSONTests {
    @Test(arguments: [
        #"{"a":[1,2.5,-3e2,true,false,null,"x\"\\\/\n\u00e9\ud83d\ude00"]}"#, "[]", "{}", #""""#, "0", "-0.5",
    ])
    func parsesValidJSON(text: String) throws {
        let value = try JSONValue.parse(text)
        #expect(try JSONValue.parse(value.serialized()) == value)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\":1,}", "01", "1.", "\"\\x\"", "\"\\ud800\"", "[1] x", "nul", "\"\u{1}\""])
    func rejectsInvalidJSON(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test func randomValuesRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        func random(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random())
            case 2: return .number(Double(Int.random(in: -1_000_000...1_000_000)) / 8)
            case 3:
                return .string(
                    String(
                        (0..<Int.random(in: 0...8)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0...126))) }))
            case 4: return .array((0..<Int.random(in: 0...4)).map { _ in random(depth + 1) })
            default: return .object((0..<Int.random(in: 0...4)).map { ("k\($0)", random(depth + 1)) })
            }
        }
        for _ in 0..<500 {
            let value = random(0)
            #expect(try JSONValue.parse(value.serialized()) == value)
        }
    }
}
