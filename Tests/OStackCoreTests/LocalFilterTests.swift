@testable import OStackCore
import OStackTestSupport
import Testing

private func json(_ text: String) throws -> JSONValue {
    try #require(JSONValue.parse(Array(text.utf8)), "not JSON: \(text)")
}

// MARK: - Parsing the wire forms

@Suite struct FilterConditionParseTests {
    func parse(_ text: String) throws -> FilterCondition {
        try FilterCondition.parse(try json(text))
    }

    @Test func arrayComparison() throws {
        #expect(try parse(#"["status","=","open"]"#) == .compare(field: "status", op: .eq, operand: .value("open")))
        #expect(try parse(#"["amount",">=",1000]"#) == .compare(field: "amount", op: .gte, operand: .value(1000)))
        #expect(
            try parse(#"["a","in",[1,"x",null]]"#) == .compare(field: "a", op: .in, operand: .value([1, "x", nil])))
        #expect(
            try parse(#"["d","between",["2026-01-01","2026-03-31"]]"#)
                == .compare(field: "d", op: .between, operand: .value(["2026-01-01", "2026-03-31"])))
    }

    @Test(arguments: [
        ("=", FilterCondition.Operator.eq), ("==", .eq), ("equals", .eq), ("EQ", .eq),
        ("<>", .ne), ("not_equals", .ne), ("notEquals", .ne), ("neq", .ne),
        ("after", .gt), ("greater_than", .gt), ("greaterOrEqual", .gte), ("before", .lt), ("lessthanorequal", .lte),
        ("startsWith", .startsWith), ("ends_with", .endsWith), ("notcontains", .notContains), ("ICONTAINS", .icontains),
        ("like", .like), ("ilike", .ilike),
    ])
    func arrayOperatorSpellings(spelling: String, op: FilterCondition.Operator) throws {
        #expect(try parse("[\"f\",\"\(spelling)\",\"v\"]") == .compare(field: "f", op: op, operand: .value("v")))
    }

    @Test func nullOperatorsTakeNoValue() throws {
        for spelling in ["is_null", "isNull", "is_empty", "ISEMPTY"] {
            #expect(try parse("[\"f\",\"\(spelling)\"]") == .compare(field: "f", op: .null, operand: .value(true)))
        }
        for spelling in ["is_not_null", "isNotNull", "is_not_empty", "isnotempty"] {
            #expect(try parse("[\"f\",\"\(spelling)\"]") == .compare(field: "f", op: .null, operand: .value(false)))
        }
        // A value after a null operator is ignored.
        #expect(try parse(#"["f","is_null",7]"#) == .compare(field: "f", op: .null, operand: .value(true)))
    }

    @Test func groupsAndLegacyLists() throws {
        let a: FilterCondition = .compare(field: "a", op: .eq, operand: .value(1))
        let b: FilterCondition = .compare(field: "b", op: .gt, operand: .value(2))
        let c: FilterCondition = .compare(field: "c", op: .null, operand: .value(true))
        #expect(try parse(#"["and",["a","=",1],["or",["b",">",2],["c","is_null"]]]"#) == .all([a, .any([b, c])]))
        #expect(try parse(#"["AND",["a","=",1]]"#) == .all([a]))
        #expect(try parse(#"["Or",["a","=",1],["b",">",2]]"#) == .any([a, b]))
        #expect(try parse(#"[["a","=",1],["b",">",2]]"#) == .all([a, b]))
    }

    @Test func objectForm() throws {
        #expect(try parse(#"{"status":"open"}"#) == .compare(field: "status", op: .eq, operand: .value("open")))
        #expect(try parse(#"{"a":null}"#) == .compare(field: "a", op: .eq, operand: .value(nil)))
        #expect(
            try parse(#"{"a":{"$gt":1,"$lt":5}}"#)
                == .all([
                    .compare(field: "a", op: .gt, operand: .value(1)),
                    .compare(field: "a", op: .lt, operand: .value(5)),
                ]))
        #expect(
            try parse(#"{"a":1,"b":"x"}"#)
                == .all([
                    .compare(field: "a", op: .eq, operand: .value(1)),
                    .compare(field: "b", op: .eq, operand: .value("x")),
                ]))
        #expect(try parse(#"{"a":{"$in":["x","y"]}}"#) == .compare(field: "a", op: .in, operand: .value(["x", "y"])))
        #expect(try parse(#"{"a":{"$null":false}}"#) == .compare(field: "a", op: .null, operand: .value(false)))
        #expect(try parse(#"{"a":{"$exists":true}}"#) == .compare(field: "a", op: .exists, operand: .value(true)))
        #expect(try parse(#"{"$and":[]}"#) == .constant(true))
        #expect(try parse(#"{"$or":[]}"#) == .constant(false))
        #expect(try parse(#"{"$not":{"a":1}}"#) == .not(.compare(field: "a", op: .eq, operand: .value(1))))
        #expect(try parse(#"{"$not":["a","=",1]}"#) == .not(.compare(field: "a", op: .eq, operand: .value(1))))
        #expect(
            try parse(#"{"$or":[{"a":1},["b",">",2]]}"#)
                == .any([
                    .compare(field: "a", op: .eq, operand: .value(1)),
                    .compare(field: "b", op: .gt, operand: .value(2)),
                ]))
    }

    @Test func fieldReferences() throws {
        // Like the server, a bare {"$field"} is not an operator: column equality is {"$eq":{"$field":…}}.
        #expect(throws: OStackError.self) { try parse(#"{"a":{"$field":"b"}}"#) }
        #expect(try parse(#"{"a":{"$eq":{"$field":"b"}}}"#) == .compare(field: "a", op: .eq, operand: .field("b")))
        #expect(try parse(#"{"a":{"$gte":{"$field":"b"}}}"#) == .compare(field: "a", op: .gte, operand: .field("b")))
        #expect(try parse(#"["a","<",{"$field":"b"}]"#) == .compare(field: "a", op: .lt, operand: .field("b")))
        #expect(try parse(#"{"a":{"$gte":{"$field":"b"}}}"#).fields == ["a", "b"])
    }

    @Test(arguments: [
        #""x""#, "1", "null", "true", "[]", #"["and"]"#, #"["or"]"#, #"["a"]"#, #"["a","~",1]"#, #"["a",1,2]"#,
        #"["a","=",1,2]"#, #"["a","="]"#, #"["a","=",[1]]"#, #"["a","=",{"b":1}]"#, #"["a","in",1]"#,
        #"["a","in",[[1]]]"#, #"["a","nin","x"]"#, #"["a","between",[1]]"#, #"["a","between",[1,2,3]]"#,
        #"["a","between",1]"#, #"["a","contains",1]"#, #"["a","like",null]"#, #"["and",1]"#, #"["and",{"a":1}]"#,
        "[1]", #"[["a","=",1],"b"]"#, #"{"a":{}}"#, #"{"$foo":1}"#, #"{"a":{"$foo":1}}"#, #"{"a":{"$null":"yes"}}"#,
        #"{"a":{"$exists":1}}"#, #"{"$and":{}}"#, #"{"$or":"x"}"#, #"{"a":{"$in":"x"}}"#, #"{"a":[1,2]}"#,
        #"{"a":{"$gt":[1]}}"#, #"{"a":{"$field":"b","$gt":1}}"#, #"{"$not":1}"#, #"{"$and":[1]}"#,
        #"{"a":{"$contains":5}}"#,
    ])
    func malformedFiltersAreInvalidFilter(text: String) throws {
        let value = try json(text)
        let error = #expect(throws: OStackError.self) { try FilterCondition.parse(value) }
        #expect(error?.code == .invalidFilter, "\(text)")
    }

    @Test func deepNestingIsRefusedNotOverflowed() throws {
        let deepObject = String(repeating: #"{"$not":"#, count: 100) + #"{"a":1}"# + String(repeating: "}", count: 100)
        let error = #expect(throws: OStackError.self) { try FilterCondition.parse(try json(deepObject)) }
        #expect(error?.code == .invalidFilter)
        // The array form has the same limit.
        let deepArray =
            String(repeating: #"["and","#, count: 100) + #"["a","=",1]"# + String(repeating: "]", count: 100)
        let arrayError = #expect(throws: OStackError.self) { try FilterCondition.parse(try json(deepArray)) }
        #expect(arrayError?.code == .invalidFilter)
        let deepList = String(repeating: "[", count: 100) + #"["a","=",1]"# + String(repeating: "]", count: 100)
        #expect(throws: OStackError.self) { try FilterCondition.parse(try json(deepList)) }
        // Moderate nesting is fine.
        let fine = String(repeating: #"{"$not":"#, count: 20) + #"{"a":1}"# + String(repeating: "}", count: 20)
        #expect(throws: Never.self) { try FilterCondition.parse(try json(fine)) }
    }
}

// MARK: - Evaluation

@Suite struct LocalFilterTests {
    /// Evaluates through both entry points (bytes and decoded value), expects them to agree.
    func matches(_ filter: String, _ record: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let compiled = LocalFilter(try FilterCondition.parse(try json(filter)))
        let value = try json(record)
        let viaBytes = Array(record.utf8).withUnsafeBytes { compiled.matches($0) }
        let viaValue = compiled.matches(value)
        #expect(
            viaBytes == viaValue, "bytes and value disagree: \(filter) on \(record)", sourceLocation: sourceLocation)
        return viaBytes
    }

    func verify(
        _ filter: String, match: [String] = [], reject: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for record in match {
            #expect(
                try matches(filter, record, sourceLocation: sourceLocation), "\(filter) should match \(record)",
                sourceLocation: sourceLocation)
        }
        for record in reject {
            #expect(
                try !matches(filter, record, sourceLocation: sourceLocation), "\(filter) should not match \(record)",
                sourceLocation: sourceLocation)
        }
    }

    // MARK: NULL and missing

    // ObjectStack's conformance tables (filter-logic, cross-field): two-valued logic, where a NULL or
    // missing field fails the positive comparisons and satisfies the negative ones.
    @Test func positiveComparisonsWithNullOrMissingDoNotMatch() throws {
        for op in ["=", ">", ">=", "<", "<="] {
            try verify("[\"a\",\"\(op)\",1]", reject: [#"{"a":null}"#, "{}", #"{"b":1}"#])
        }
        try verify(#"["a","between",[0,10]]"#, reject: [#"{"a":null}"#, "{}"])
        try verify(#"["a","in",[1,null]]"#, match: [#"{"a":1}"#], reject: [#"{"a":null}"#, "{}"])
        try verify(#"["a","contains","x"]"#, match: [#"{"a":"x"}"#], reject: [#"{"a":null}"#, "{}"])
        try verify(#"["a","startswith","x"]"#, reject: [#"{"a":null}"#, "{}"])
    }

    @Test func negativeComparisonsMatchNullAndMissing() throws {
        try verify(
            #"["a","!=",1]"#, match: [#"{"a":2}"#, #"{"a":"x"}"#, #"{"a":null}"#, "{}"], reject: [#"{"a":1}"#])
        try verify(#"["a","nin",[1,2]]"#, match: [#"{"a":3}"#, #"{"a":null}"#, "{}"], reject: [#"{"a":1}"#])
        try verify(
            #"["a","notcontains","x"]"#, match: [#"{"a":"abc"}"#, #"{"a":null}"#, "{}"], reject: [#"{"a":"xyz"}"#])
    }

    @Test func equalityWithNullIsTheNullTest() throws {
        try verify(#"["a","=",null]"#, match: [#"{"a":null}"#, "{}"], reject: [#"{"a":1}"#, #"{"a":""}"#])
        try verify(#"{"a":null}"#, match: [#"{"a":null}"#, "{}"], reject: [#"{"a":""}"#, #"{"a":0}"#])
        try verify(#"{"a":{"$ne":null}}"#, match: [#"{"a":1}"#, #"{"a":""}"#], reject: [#"{"a":null}"#, "{}"])
        try verify(#"{"a":{"$gt":null}}"#, reject: [#"{"a":null}"#, #"{"a":1}"#])
    }

    @Test func isNullMatchesNullAndMissing() throws {
        try verify(
            #"["a","is_null"]"#, match: [#"{"a":null}"#, "{}", #"{"b":null}"#],
            reject: [#"{"a":0}"#, #"{"a":""}"#, #"{"a":false}"#, #"{"a":[]}"#, #"{"a":{}}"#])
        try verify(
            #"["a","is_not_null"]"#, match: [#"{"a":0}"#, #"{"a":""}"#, #"{"a":false}"#, #"{"a":[]}"#],
            reject: [#"{"a":null}"#, "{}"])
        try verify(#"{"a":{"$null":true}}"#, match: [#"{"a":null}"#, "{}"], reject: [#"{"a":"x"}"#])
    }

    @Test func existsTestsPresenceNotValue() throws {
        try verify(
            #"{"a":{"$exists":true}}"#, match: [#"{"a":null}"#, #"{"a":0}"#, #"{"a":[1]}"#],
            reject: ["{}", #"{"b":1}"#])
        try verify(#"{"a":{"$exists":false}}"#, match: ["{}"], reject: [#"{"a":null}"#, #"{"a":0}"#])
    }

    @Test func notIsTheExactComplement() throws {
        try verify(
            #"{"$not":{"a":1}}"#, match: [#"{"a":2}"#, #"{"a":null}"#, "{}", #"{"a":"x"}"#, #"{"a":[1]}"#],
            reject: [#"{"a":1}"#, #"{"a":"1"}"#])
        // Rows whose inner comparison failed on incomparable types are returned.
        try verify(
            #"{"$not":{"a":{"$gt":5}}}"#, match: [#"{"a":"x"}"#, #"{"a":true}"#, #"{"a":3}"#], reject: [#"{"a":6}"#])
        try verify(
            #"{"$not":{"$or":[{"a":1},{"b":2}]}}"#, match: [#"{"a":null,"b":3}"#], reject: [#"{"a":null,"b":2}"#])
        try verify(#"{"$not":{"$and":[{"a":1},{"b":2}]}}"#, match: [#"{"a":null,"b":2}"#], reject: [#"{"a":1,"b":2}"#])
        // Double negation is the identity.
        try verify(#"{"$not":{"$not":{"a":1}}}"#, match: [#"{"a":1}"#], reject: [#"{"a":null}"#, "{}", #"{"a":2}"#])
        try verify(#"{"$not":{"a":{"$ne":1}}}"#, match: [#"{"a":1}"#], reject: [#"{"a":null}"#, "{}", #"{"a":2}"#])
        try verify(#"{"$not":["a","is_null"]}"#, match: [#"{"a":0}"#], reject: ["{}", #"{"a":null}"#])
    }

    @Test func groupsAreTwoValued() throws {
        try verify(
            #"["or",["a","=",1],["b","=",2]]"#, match: [#"{"a":null,"b":2}"#, #"{"a":1}"#], reject: [#"{"b":3}"#, "{}"])
        try verify(
            #"["and",["a","=",1],["b","=",2]]"#, match: [#"{"a":1,"b":2}"#],
            reject: [#"{"a":1}"#, #"{"a":1,"b":null}"#])
        try verify(#"["or",["a","!=",1],["b","=",2]]"#, match: ["{}", #"{"a":null,"b":3}"#], reject: [#"{"a":1}"#])
    }

    @Test func emptyGroupsAreConstants() throws {
        try verify(#"{"$and":[]}"#, match: ["{}", #"{"a":null}"#, #"{"a":1}"#])
        try verify(#"{"$or":[]}"#, reject: ["{}", #"{"a":null}"#, #"{"a":1}"#])
        try verify(#"{"$not":{"$or":[]}}"#, match: ["{}"])
        try verify(#"{"$and":[],"a":1}"#, match: [#"{"a":1}"#], reject: [#"{"a":2}"#])
        try verify(#"{"$or":[],"a":1}"#, reject: [#"{"a":1}"#])
    }

    // MARK: Types

    @Test func numericStringsCompareWithNumbersAsNumbers() throws {
        try verify(
            #"["a","=",5]"#, match: [#"{"a":5}"#, #"{"a":"5"}"#, #"{"a":"5.0"}"#, #"{"a":"5e0"}"#],
            reject: [#"{"a":"five"}"#, #"{"a":"6"}"#])
        // string = string is textual
        try verify(#"["a","=","5"]"#, match: [#"{"a":5}"#, #"{"a":"5"}"#], reject: [#"{"a":"5.0"}"#])
        try verify(
            #"["a",">",10]"#, match: [#"{"a":"11"}"#, #"{"a":10.5}"#],
            reject: [#"{"a":"9"}"#, #"{"a":"10"}"#, #"{"a":"abc"}"#])
        try verify(#"["a","<","10"]"#, match: [#"{"a":9}"#, #"{"a":-1}"#], reject: [#"{"a":10}"#, #"{"a":100}"#])
    }

    @Test func onlyFiniteDecimalStringsAreNumeric() throws {
        // "nan" would otherwise equal every number (NaN is neither < nor > anything).
        try verify(#"["a","=",5]"#, reject: [#"{"a":"nan"}"#, #"{"a":"NaN"}"#, #"{"a":" 5"}"#, #"{"a":"5 "}"#])
        try verify(#"["a","between",[1,2]]"#, reject: [#"{"a":"nan"}"#])
        try verify(#"["a","in",[7]]"#, reject: [#"{"a":"nan"}"#])
        try verify(#"["a",">",5]"#, reject: [#"{"a":"inf"}"#, #"{"a":"Infinity"}"#, #"{"a":"1e400"}"#])
        try verify(#"["a","=",16]"#, reject: [#"{"a":"0x10"}"#])
        try verify(#"["a","=",-150]"#, match: [#"{"a":"-1.5e2"}"#, #"{"a":"-150.0"}"#])
        // Not numeric, so incomparable: returned by a NOT.
        try verify(#"{"$not":{"a":5}}"#, match: [#"{"a":"nan"}"#])
    }

    @Test func textOperatorsWorkOnCodePoints() throws {
        // "e" + combining acute accent: one Character in Swift, two code points on the server.
        let decomposed = #"{"t":"é"}"#
        try verify(#"["t","=","é"]"#, reject: [decomposed])
        try verify(#"["t","!=","é"]"#, match: [decomposed])
        try verify(#"["t","<","é"]"#, match: [decomposed])  // U+0065 < U+00E9
        try verify(#"["t","in",["é"]]"#, reject: [decomposed])
        try verify(#"["t","contains","e"]"#, match: [decomposed])
        try verify(#"["t","contains","é"]"#, reject: [decomposed])
        try verify(#"["t","startswith","e"]"#, match: [decomposed])
        try verify(#"["t","endswith","́"]"#, match: [decomposed])
        try verify(#"["t","like","e_"]"#, match: [decomposed])
        try verify(#"["t","like","_"]"#, reject: [decomposed])
    }

    @Test func stringsCompareByCodePointNotNumerically() throws {
        // "10" < "9" as text.
        try verify(#"["a",">","9"]"#, reject: [#"{"a":"10"}"#])
        try verify(#"["a","<","9"]"#, match: [#"{"a":"10"}"#, #"{"a":"1"}"#])
        // Upper case sorts before lower case; ISO dates order correctly.
        try verify(#"["a","<","a"]"#, match: [#"{"a":"Z"}"#, #"{"a":"A"}"#], reject: [#"{"a":"b"}"#, #"{"a":"a"}"#])
        try verify(
            #"["d",">=","2026-01-31"]"#, match: [#"{"d":"2026-02-01"}"#, #"{"d":"2026-01-31T10:00:00.000Z"}"#],
            reject: [#"{"d":"2026-01-30"}"#, #"{"d":"2025-12-31"}"#])
    }

    @Test func booleansOrderFalseBeforeTrueAndDoNotMixWithOtherTypes() throws {
        try verify(
            #"["d","=",true]"#, match: [#"{"d":true}"#], reject: [#"{"d":false}"#, #"{"d":"true"}"#, #"{"d":1}"#])
        try verify(#"["d","<",true]"#, match: [#"{"d":false}"#], reject: [#"{"d":true}"#, #"{"d":0}"#])
        try verify(#"["d","=",1]"#, reject: [#"{"d":true}"#])
    }

    @Test func mismatchedTypesAreUnequal() throws {
        // Server semantics (DevServer FilterEvaluator): different kinds compare as not equal, not as unknown.
        try verify(#"["a","!=",5]"#, match: [#"{"a":"abc"}"#, #"{"a":true}"#], reject: [#"{"a":"5"}"#])
        try verify(#"["a",">",5]"#, reject: [#"{"a":"abc"}"#, #"{"a":true}"#])
        try verify(#"["a","nin",[5]]"#, match: [#"{"a":"abc"}"#], reject: [#"{"a":"5"}"#])
    }

    @Test func compoundValuesNeverEqualScalars() throws {
        try verify(#"["a","=",1]"#, reject: [#"{"a":[1]}"#, #"{"a":{"x":1}}"#])
        try verify(#"["a","in",[1]]"#, reject: [#"{"a":[1]}"#])
        try verify(#"["a","contains","x"]"#, reject: [#"{"a":["x"]}"#])
    }

    // MARK: Operators

    @Test func between() throws {
        try verify(
            #"["n","between",[1,5]]"#, match: [#"{"n":1}"#, #"{"n":3}"#, #"{"n":5}"#, #"{"n":"3"}"#, #"{"n":4.99}"#],
            reject: [#"{"n":0}"#, #"{"n":5.01}"#, #"{"n":6}"#, #"{"n":null}"#, #"{"n":"x"}"#])
        try verify(
            #"["d","between",["2026-01-01","2026-03-31"]]"#, match: [#"{"d":"2026-02-15"}"#, #"{"d":"2026-01-01"}"#],
            reject: [#"{"d":"2026-04-01"}"#, #"{"d":"2025-12-31"}"#])
        // Reversed bounds match nothing.
        try verify(#"["n","between",[5,1]]"#, reject: [#"{"n":3}"#])
    }

    @Test func inAndNotIn() throws {
        try verify(
            #"["s","in",["a","b"]]"#, match: [#"{"s":"a"}"#, #"{"s":"b"}"#],
            reject: [#"{"s":"c"}"#, #"{"s":"A"}"#, #"{"s":null}"#])
        try verify(#"["s","nin",["a","b"]]"#, match: [#"{"s":"c"}"#, #"{"s":null}"#, "{}"], reject: [#"{"s":"a"}"#])
        try verify(#"["n","in",[1,2]]"#, match: [#"{"n":2}"#, #"{"n":"2"}"#], reject: [#"{"n":3}"#])
        try verify(#"["n","in",[]]"#, reject: [#"{"n":1}"#])
        try verify(#"["n","nin",[]]"#, match: [#"{"n":1}"#, #"{"n":null}"#])
    }

    @Test func textOperators() throws {
        let hello = #"{"t":"Hello World"}"#
        try verify(#"["t","contains","World"]"#, match: [hello], reject: [#"{"t":"hello world"}"#, #"{"t":5}"#])
        try verify(#"["t","contains","world"]"#, reject: [hello])
        try verify(#"["t","contains",""]"#, match: [hello, #"{"t":""}"#])
        try verify(#"["t","icontains","wORLD"]"#, match: [hello], reject: [#"{"t":"Hello Word"}"#])
        try verify(#"["t","notcontains","xyz"]"#, match: [hello])
        try verify(#"["t","notcontains","World"]"#, reject: [hello])
        try verify(#"["t","notcontains",""]"#, reject: [hello])
        try verify(#"["t","startswith","Hell"]"#, match: [hello], reject: [#"{"t":"hell"}"#])
        try verify(#"["t","startswith","hell"]"#, reject: [hello])
        try verify(#"["t","endswith","World"]"#, match: [hello], reject: [#"{"t":"World!"}"#])
        // No wildcards in contains/startswith: '%' is literal.
        try verify(#"["t","contains","%"]"#, match: [#"{"t":"50%"}"#], reject: [hello])
        try verify(#"["t","startswith","_"]"#, match: [#"{"t":"_x"}"#], reject: [hello])
    }

    @Test func likeAndIlike() throws {
        let hello = #"{"t":"Hello World"}"#
        try verify(#"["t","like","H%o W_rld"]"#, match: [hello])
        try verify(#"["t","like","h%"]"#, reject: [hello])
        try verify(#"["t","ilike","h%"]"#, match: [hello])
        try verify(#"["t","ilike","HELLO_WORLD"]"#, match: [hello])
        try verify(#"["t","like","%"]"#, match: [#"{"t":""}"#, hello])
        try verify(#"["t","like","_"]"#, match: [#"{"t":"x"}"#], reject: [#"{"t":""}"#, #"{"t":"xy"}"#])
        try verify(
            #"["t","like","a%b%c"]"#, match: [#"{"t":"aXbYc"}"#, #"{"t":"abc"}"#, #"{"t":"abcbc"}"#],
            reject: [#"{"t":"aXbYcd"}"#])
        try verify(#"["t","like","%ab"]"#, match: [#"{"t":"aab"}"#, #"{"t":"abab"}"#], reject: [#"{"t":"aba"}"#])
        try verify(#"["t","like","a_c"]"#, match: [#"{"t":"abc"}"#], reject: [#"{"t":"abbc"}"#, #"{"t":"ac"}"#])
        try verify(#"["t","like","Hello World"]"#, match: [hello], reject: [#"{"t":"Hello World!"}"#])
        try verify(#"["t","like","%"]"#, reject: [#"{"t":1}"#, #"{"t":null}"#])
        // A backslash escapes the next character, wildcards included.
        try verify(#"["t","like","100\\%"]"#, match: [#"{"t":"100%"}"#], reject: [#"{"t":"100X"}"#])
        try verify(#"["t","like","a\\_b"]"#, match: [#"{"t":"a_b"}"#], reject: [#"{"t":"axb"}"#])
        try verify(#"["t","like","a\\\\b"]"#, match: [#"{"t":"a\\b"}"#], reject: [#"{"t":"ab"}"#])
    }

    @Test func icontainsFoldsASCIIOnlyAndTakesItsComparandLiterally() throws {
        try verify(
            #"["t","icontains","acme"]"#, match: [#"{"t":"ACME Corp"}"#, #"{"t":"acme"}"#], reject: [#"{"t":"acm"}"#])
        try verify(#"["t","icontains","café"]"#, match: [#"{"t":"CAFé"}"#], reject: [#"{"t":"CAFÉ"}"#])
        try verify(#"["t","icontains","a.b"]"#, match: [#"{"t":"xA.By"}"#], reject: [#"{"t":"axb"}"#])
        try verify(#"["t","icontains","1%"]"#, match: [#"{"t":"1%"}"#], reject: [#"{"t":"1x"}"#])
    }

    @Test func datetimeBareDayBoundsAreTyped() throws {
        let types = ["at": "datetime", "on": "date", "t": "time"]
        func check(_ filter: String, _ record: String) throws -> Bool {
            LocalFilter(try FilterCondition.parse(try json(filter)), fieldTypes: types).matches(try json(record))
        }
        // <= a bare day on a datetime keeps the whole day, half-open at the next midnight.
        #expect(try check(#"{"at":{"$lte":"2026-07-28"}}"#, #"{"at":"2026-07-28T23:59:59.999Z"}"#))
        #expect(try !check(#"{"at":{"$lte":"2026-07-28"}}"#, #"{"at":"2026-07-29T00:00:00Z"}"#))
        // > a bare day anchors at midnight: midnight itself is out.
        #expect(try !check(#"{"at":{"$gt":"2026-07-28"}}"#, #"{"at":"2026-07-28T00:00:00.000Z"}"#))
        // Instants compare as instants, whatever their spelling.
        #expect(try check(#"{"at":{"$eq":"2026-07-28T02:00:00+02:00"}}"#, #"{"at":"2026-07-28T00:00:00.000Z"}"#))
        // date and time fields compare as text and are never widened.
        #expect(try !check(#"{"t":{"$lte":"14:30:00"}}"#, #"{"t":"14:30:00.500"}"#))
        #expect(try check(#"{"on":{"$lte":"2026-07-28"}}"#, #"{"on":"2026-07-28"}"#))
        // A NULL datetime satisfies only the negative comparisons.
        #expect(try check(#"{"at":{"$ne":"2026-07-28"}}"#, #"{"at":null}"#))
        #expect(try !check(#"{"at":{"$lte":"2026-07-28"}}"#, "{}"))
    }

    @Test func calendarArithmetic() {
        #expect(CalendarInstant.milliseconds("1970-01-01") == 0)
        #expect(CalendarInstant.milliseconds("1969-12-31T23:00:00.000Z") == -3_600_000)
        #expect(CalendarInstant.milliseconds("2024-02-29") == 1_709_164_800_000)
        #expect(CalendarInstant.milliseconds("2024-03-01")! - CalendarInstant.milliseconds("2024-02-29")! == 86_400_000)
        #expect(CalendarInstant.milliseconds("2023-02-29") == nil)
        #expect(
            CalendarInstant.milliseconds("2026-07-28 09:15") == CalendarInstant.milliseconds("2026-07-28T09:15:00Z"))
        #expect(CalendarInstant.milliseconds("2026-07-28T09:15:00.5Z")! % 1000 == 500)
        for bad in ["", "2026-7-28", "2026-13-01", "2026-07-28T", "2026-07-28T25:00", "2026-07-28T10:00Zjunk"] {
            #expect(CalendarInstant.milliseconds(bad) == nil, "\(bad)")
        }
    }

    @Test func columnComparison() throws {
        try verify(
            #"{"a":{"$eq":{"$field":"b"}}}"#, match: [#"{"a":1,"b":1}"#, #"{"a":"1","b":1}"#, #"{"a":"x","b":"x"}"#],
            reject: [#"{"a":1,"b":2}"#, #"{"a":1}"#, #"{"b":1}"#])
        // Two NULLs are equal (the cross-field conformance table); one NULL is unequal.
        try verify(#"{"a":{"$eq":{"$field":"b"}}}"#, match: [#"{"a":null,"b":null}"#, "{}"])
        try verify(
            #"{"a":{"$gt":{"$field":"b"}}}"#, match: [#"{"a":3,"b":2}"#], reject: [#"{"a":2,"b":2}"#, #"{"a":3}"#])
        try verify(
            #"{"a":{"$ne":{"$field":"b"}}}"#, match: [#"{"a":3,"b":2}"#, #"{"a":3,"b":null}"#],
            reject: [#"{"a":2,"b":2}"#, #"{"a":null,"b":null}"#])
        try verify(
            #"["end",">=",{"$field":"start"}]"#, match: [#"{"start":"2026-01-01","end":"2026-01-02"}"#],
            reject: [#"{"start":"2026-01-03","end":"2026-01-02"}"#])
        // The same field on both sides.
        try verify(#"{"a":{"$eq":{"$field":"a"}}}"#, match: [#"{"a":1}"#, #"{"a":null}"#])
        try verify(#"{"a":{"$ne":{"$field":"a"}}}"#, reject: [#"{"a":1}"#, #"{"a":null}"#, "{}"])
    }

    @Test func rangeOnOneFieldIsAConjunction() throws {
        try verify(#"{"a":{"$gt":1,"$lt":5}}"#, match: [#"{"a":2}"#], reject: [#"{"a":1}"#, #"{"a":5}"#, #"{"a":7}"#])
    }

    @Test func fieldsInRecordsWithEscapesAndNesting() throws {
        try verify(#"["t","=","a\"b"]"#, match: [#"{"x":{"t":"no"},"t":"a\"b"}"#, #"{"t":"a\u0022b"}"#])
        try verify(#"["t","=","é"]"#, match: [#"{"t":"\u00e9"}"#, #"{"\u0074":"é"}"#])
    }
}

// MARK: - Properties

/// A random filter: an expression of the `--filter` language, or a wrapper only the object form has.
private indirect enum GeneratedFilter {
    case expression(FilterExpression)
    case not(GeneratedFilter)
    case and([GeneratedFilter])
    case or([GeneratedFilter])
    case fieldCompare(String, FilterCondition.Operator, String)
    case like(String, String, caseInsensitive: Bool)

    var wire: JSONValue {
        switch self {
        case .expression(let expression): expression.wireAST
        case .not(let child): ["$not": child.wire]
        case .and(let children): ["$and": .array(children.map(\.wire))]
        case .or(let children): ["$or": .array(children.map(\.wire))]
        case .fieldCompare(let field, let op, let other):
            op == .eq && field != "c"
                ? [field: ["$eq": ["$field": .string(other)]]]
                : [field: .object(["$" + op.rawValue: ["$field": .string(other)]])]
        case .like(let field, let pattern, let caseInsensitive):
            [.string(field), .string(caseInsensitive ? "ilike" : "like"), .string(pattern)]
        }
    }
}

/// An independent model of the server's filter semantics (docs/filters.md), two-valued: with `$not` being
/// NULL-safe, "unknown" is indistinguishable from "false" in every result.
private enum Reference {
    typealias Record = [String: JSONValue]

    static func matches(_ filter: GeneratedFilter, _ record: Record) -> Bool {
        switch filter {
        case .expression(let expression): return matches(expression, record)
        case .not(let child): return !matches(child, record)
        case .and(let children): return children.allSatisfy { matches($0, record) }
        case .or(let children): return children.contains { matches($0, record) }
        case .fieldCompare(let field, let op, let other):
            let leftNull = record[field] == nil || record[field] == .null
            let rightNull = record[other] == nil || record[other] == .null
            if leftNull && rightNull { return op == .eq }
            if leftNull || rightNull { return op == .ne }
            return scalar(record[field], op, record[other]!)
        case .like(let field, let pattern, let caseInsensitive):
            guard case .string(let text)? = record[field] else { return false }
            return like(Array(text.unicodeScalars)[...], Array(pattern.unicodeScalars)[...], caseInsensitive)
        }
    }

    static func matches(_ expression: FilterExpression, _ record: Record) -> Bool {
        switch expression {
        case .all(let children): return children.allSatisfy { matches($0, record) }
        case .any(let children): return children.contains { matches($0, record) }
        case .compare(let field, let op, let literal):
            let ops: [FilterExpression.Comparison: FilterCondition.Operator] = [
                .eq: .eq, .neq: .ne, .gt: .gt, .gte: .gte, .lt: .lt, .lte: .lte, .contains: .contains,
                .notContains: .notContains, .startsWith: .startsWith, .endsWith: .endsWith,
            ]
            return scalar(record[field], ops[op]!, value(literal))
        case .membership(let field, let values, let negated):
            guard let present = record[field], present != .null else { return negated }
            let found = values.contains { compare(present, value($0)) == 0 }
            return negated ? !found : found
        case .null(let field, let isNull):
            let absent = record[field] == nil || record[field] == .null
            return absent == isNull
        case .between(let field, let low, let high):
            guard let present = record[field], present != .null, let lower = compare(present, value(low)),
                let upper = compare(present, value(high))
            else { return false }
            return lower >= 0 && upper <= 0
        }
    }

    static func value(_ literal: FilterLiteral) -> JSONValue {
        switch literal {
        case .string(let text): .string(text)
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        }
    }

    /// Two-valued, as ObjectStack's conformance tables state: a NULL or missing field satisfies only
    /// `!=` (of a value), `not contains` and `= null`.
    static func scalar(_ left: JSONValue?, _ op: FilterCondition.Operator, _ right: JSONValue) -> Bool {
        guard let left, left != .null else {
            switch op {
            case .eq: return right == .null
            case .ne: return right != .null
            case .notContains: return true
            default: return false
            }
        }
        switch op {
        case .eq: return right != .null && compare(left, right) == 0
        case .ne: return right == .null || compare(left, right) != 0
        case .gt: return compare(left, right).map { $0 > 0 } ?? false
        case .gte: return compare(left, right).map { $0 >= 0 } ?? false
        case .lt: return compare(left, right).map { $0 < 0 } ?? false
        case .lte: return compare(left, right).map { $0 <= 0 } ?? false
        case .contains, .notContains, .startsWith, .endsWith:
            guard case .string(let text) = left, case .string(let needle) = right else { return op == .notContains }
            let t = Array(text.unicodeScalars)
            let n = Array(needle.unicodeScalars)
            switch op {
            case .contains:
                return n.isEmpty
                    || (0...max(0, t.count - n.count)).contains {
                        t.count >= n.count && Array(t[$0..<$0 + n.count]) == n
                    }
            case .notContains:
                return
                    !(n.isEmpty
                    || (0...max(0, t.count - n.count)).contains {
                        t.count >= n.count && Array(t[$0..<$0 + n.count]) == n
                    })
            case .startsWith: return t.starts(with: n)
            default: return t.count >= n.count && Array(t.suffix(n.count)) == n
            }
        default: fatalError("not generated: \(op)")
        }
    }

    /// Same-kind ordering; numeric text against a number as a number; otherwise incomparable.
    static func compare(_ left: JSONValue, _ right: JSONValue) -> Int? {
        func sign(_ a: Double, _ b: Double) -> Int { a < b ? -1 : (a > b ? 1 : 0) }
        switch (left, right) {
        case (.number(let a), .number(let b)): return sign(a, b)
        case (.string(let a), .string(let b)):
            let x = a.unicodeScalars.map(\.value)
            let y = b.unicodeScalars.map(\.value)
            return x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
        case (.bool(let a), .bool(let b)): return a == b ? 0 : (a ? 1 : -1)
        case (.string(let a), .number(let b)): return numericText[a].map { sign($0, b) }
        case (.number(let a), .string(let b)): return numericText[b].map { sign(a, $0) }
        default: return nil
        }
    }

    /// The numeric strings the generator uses, with their values (any other string is not numeric).
    static let numericText: [String: Double] = ["0": 0, "1": 1, "2": 2, "10": 10, "2.5": 2.5, "-1": -1, "1e1": 10]

    static func like(_ text: ArraySlice<Unicode.Scalar>, _ pattern: ArraySlice<Unicode.Scalar>, _ caseInsensitive: Bool)
        -> Bool
    {
        func fold(_ s: Unicode.Scalar) -> UInt32 {
            caseInsensitive && (65...90).contains(s.value) ? s.value + 32 : s.value
        }
        guard let head = pattern.first else { return text.isEmpty }
        if head == "%" {
            return (text.startIndex...text.endIndex).contains {
                like(text[$0...], pattern.dropFirst(), caseInsensitive)
            }
        }
        guard let first = text.first, head == "_" || fold(head) == fold(first) else { return false }
        return like(text.dropFirst(), pattern.dropFirst(), caseInsensitive)
    }
}

@Suite struct LocalFilterPropertyTests {
    static let fields = ["a", "b", "c"]
    static let values: [JSONValue?] = [
        nil, .null, true, false, -1, 0, 1, 2, .number(2.5), 10, "", "a", "ab", "B", "b a", "1", "2", "10", "2.5", "-1",
        "1e1",
        "A%", "a_b", [1], ["a": 1],
    ]
    static let strings = ["", "a", "ab", "b", "B", "1", "2", "10", "2.5", "x", "a%", "b a"]
    static let numbers: [Double] = [-1, 0, 1, 2, 2.5, 10]
    static let patterns = ["a%", "%b", "_", "%", "a_", "%a%", "A%", "", "_ _", "%%", "a_b"]

    fileprivate static func literal(_ generator: inout SeededGenerator) -> FilterLiteral {
        switch Int.random(in: 0..<5, using: &generator) {
        case 0, 1: return .string(strings.randomElement(using: &generator)!)
        case 2, 3: return .number(numbers.randomElement(using: &generator)!)
        default: return .bool(Bool.random(using: &generator))
        }
    }

    fileprivate static func expression(_ generator: inout SeededGenerator, depth: Int) -> FilterExpression {
        let field = fields.randomElement(using: &generator)!
        switch Int.random(in: 0..<(depth > 2 ? 4 : 6), using: &generator) {
        case 0:
            let op = FilterExpression.Comparison.allCases.filter { $0 != .icontains }.randomElement(using: &generator)!
            let textual: [FilterExpression.Comparison] = [.contains, .notContains, .startsWith, .endsWith]
            let value = textual.contains(op) ? .string(strings.randomElement(using: &generator)!) : literal(&generator)
            return .compare(field: field, op: op, value: value)
        case 1:
            return .membership(
                field: field, values: (0..<Int.random(in: 1...3, using: &generator)).map { _ in literal(&generator) },
                negated: Bool.random(using: &generator))
        case 2: return .null(field: field, isNull: Bool.random(using: &generator))
        case 3: return .between(field: field, low: literal(&generator), high: literal(&generator))
        case 4:
            return .all(
                (0..<Int.random(in: 2...3, using: &generator)).map { _ in expression(&generator, depth: depth + 1) })
        default:
            return .any(
                (0..<Int.random(in: 2...3, using: &generator)).map { _ in expression(&generator, depth: depth + 1) })
        }
    }

    fileprivate static func filter(_ generator: inout SeededGenerator, depth: Int) -> GeneratedFilter {
        switch Int.random(in: 0..<(depth > 2 ? 7 : 10), using: &generator) {
        case 0...3: return .expression(expression(&generator, depth: depth))
        case 4:
            let ops: [FilterCondition.Operator] = [.eq, .ne, .gt, .gte, .lt, .lte]
            return .fieldCompare(
                fields.randomElement(using: &generator)!, ops.randomElement(using: &generator)!,
                fields.randomElement(using: &generator)!)
        case 5:
            return .like(
                fields.randomElement(using: &generator)!, patterns.randomElement(using: &generator)!,
                caseInsensitive: Bool.random(using: &generator))
        case 6: return .not(filter(&generator, depth: depth + 1))
        case 7:
            return .and(
                (0..<Int.random(in: 0...3, using: &generator)).map { _ in filter(&generator, depth: depth + 1) })
        default:
            return .or((0..<Int.random(in: 0...3, using: &generator)).map { _ in filter(&generator, depth: depth + 1) })
        }
    }

    fileprivate static func record(_ generator: inout SeededGenerator) -> [String: JSONValue] {
        var members: [String: JSONValue] = ["id": "r1"]
        for field in fields {
            if let value = values.randomElement(using: &generator)! { members[field] = value }
        }
        return members
    }

    /// `matches(bytes)` (the query path) and `matches(JSONValue)` agree with each other and with an
    /// independent model of the server's semantics, on random records and filters.
    @Test func bytesValueAndModelAgree() throws {
        var generator = SeededGenerator(seed: 0x0F17E5)
        var matched = 0
        for _ in 0..<4000 {
            let generated = Self.filter(&generator, depth: 0)
            let condition = try FilterCondition.parse(generated.wire)
            let compiled = LocalFilter(condition)
            for _ in 0..<3 {
                let members = Self.record(&generator)
                let bytes = JSONValue.object(members).serialized()
                let viaBytes = bytes.withUnsafeBytes { compiled.matches($0) }
                let viaValue = compiled.matches(.object(members))
                let expected = Reference.matches(generated, members)
                let described =
                    "\(String(decoding: generated.wire.serialized(), as: UTF8.self)) on \(String(decoding: bytes, as: UTF8.self))"
                #expect(viaBytes == viaValue, "\(described)")
                #expect(viaBytes == expected, "\(described)")
                if viaBytes { matched += 1 }
            }
        }
        // The generator produces both outcomes in quantity.
        #expect(matched > 1500 && matched < 10500, "\(matched) of 12000 matched")
    }

    /// `--filter` text → expression → protocol AST → `FilterCondition.parse` succeeds and gives the
    /// condition the expression means.
    @Test func textToASTRoundTrip() throws {
        var generator = SeededGenerator(seed: 7)
        let fields = ["status", "amount", "due_date", "a.b", "x_1", "notes", "ünï"]
        let strings = ["open", "O'Brien", "", "say \"hi\"", "ünï", "2026-01-31", "a,b", "(x)", "and", "%_"]
        func literal() -> FilterLiteral {
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: return .string(strings.randomElement(using: &generator)!)
            case 1: return .number(Double(Int.random(in: -1000...1000, using: &generator)) / 4)
            case 2: return .bool(Bool.random(using: &generator))
            default: return .number([0.1, 1e20, -3, 123_456_789].randomElement(using: &generator)!)
            }
        }
        func expression(_ depth: Int) -> FilterExpression {
            let field = fields.randomElement(using: &generator)!
            switch Int.random(in: 0..<(depth > 2 ? 4 : 6), using: &generator) {
            case 0:
                let op = FilterExpression.Comparison.allCases.filter { $0 != .icontains }.randomElement(
                    using: &generator)!
                let textual: [FilterExpression.Comparison] = [.contains, .notContains, .startsWith, .endsWith]
                return .compare(
                    field: field, op: op,
                    value: textual.contains(op) ? .string(strings.randomElement(using: &generator)!) : literal())
            case 1:
                return .membership(
                    field: field, values: (0..<Int.random(in: 1...3, using: &generator)).map { _ in literal() },
                    negated: Bool.random(using: &generator))
            case 2: return .null(field: field, isNull: Bool.random(using: &generator))
            case 3: return .between(field: field, low: literal(), high: literal())
            case 4: return .all((0..<Int.random(in: 2...3, using: &generator)).map { _ in expression(depth + 1) })
            default: return .any((0..<Int.random(in: 2...3, using: &generator)).map { _ in expression(depth + 1) })
            }
        }
        func meaning(_ expression: FilterExpression) -> FilterCondition {
            let ops: [FilterExpression.Comparison: FilterCondition.Operator] = [
                .eq: .eq, .neq: .ne, .gt: .gt, .gte: .gte, .lt: .lt, .lte: .lte, .contains: .contains,
                .notContains: .notContains, .startsWith: .startsWith, .endsWith: .endsWith,
            ]
            switch expression {
            case .all(let children): return .all(children.map(meaning))
            case .any(let children): return .any(children.map(meaning))
            case .compare(let field, let op, let value):
                return .compare(field: field, op: ops[op]!, operand: .value(Reference.value(value)))
            case .membership(let field, let values, let negated):
                return .compare(
                    field: field, op: negated ? .nin : .in, operand: .value(.array(values.map(Reference.value))))
            case .null(let field, let isNull): return .compare(field: field, op: .null, operand: .value(.bool(isNull)))
            case .between(let field, let low, let high):
                return .compare(
                    field: field, op: .between, operand: .value([Reference.value(low), Reference.value(high)]))
            }
        }
        for _ in 0..<2000 {
            let original = expression(0)
            let text = original.text
            let parsed = try FilterParser.parse(text)
            let condition = try FilterCondition.parse(parsed.wireAST)
            #expect(condition == meaning(original), "\(text)")
            // And the serialised AST (what goes on the wire) parses to the same condition.
            let wire = try #require(JSONValue.parse(parsed.wireAST.serialized()))
            #expect(try FilterCondition.parse(wire) == condition, "\(text)")
        }
    }
}
