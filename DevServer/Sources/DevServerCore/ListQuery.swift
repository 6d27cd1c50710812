/// A parsed list/query request (docs/protocol.md#records).
struct ListQuery {
    struct SortKey {
        var field: String
        var descending: Bool
    }

    var condition: Condition?
    var fields: [String]?
    var sort: [SortKey] = []
    var limit: Int?
    var offset = 0
    var count = true
    var search: String?

    var isUpdatedAtIdAscending: Bool {
        sort.count >= 1 && sort.count <= 2 && sort[0].field == "updated_at" && !sort[0].descending
            && (sort.count == 1 || (sort[1].field == "id" && !sort[1].descending))
    }

    enum Outcome {
        case success(ListQuery)
        case failure(CoreResponse)
    }

    static let slots: [String: String] = [
        "filter": "where", "filters": "where", "$filter": "where", "where": "where",
        "select": "fields", "$select": "fields", "fields": "fields",
        "sort": "orderBy", "orderBy": "orderBy", "$orderby": "orderBy",
        "top": "limit", "$top": "limit", "limit": "limit",
        "skip": "offset", "$skip": "offset", "offset": "offset",
        "expand": "expand", "$expand": "expand", "populate": "expand",
        "search": "search", "$search": "search",
        "searchFields": "searchFields", "$searchFields": "searchFields",
        "count": "count", "$count": "count",
    ]
    static let reserved: Set<String> = [
        "cursor", "distinct", "object", "aggregations", "groupBy", "having", "page", "pageSize",
    ]
    static let hints: [String: String] = [
        "pageSize": "top", "page": "skip", "limit": "top", "order": "sort", "q": "search",
    ]

    static func parse(_ query: [(String, String)], object: ObjectDefinition) -> Outcome {
        var values: [String: [(String, String)]] = [:]
        var implicit: [(String, String)] = []
        for (key, value) in query {
            if let slot = slots[key] {
                values[slot, default: []].append((key, value))
            } else if key.hasPrefix("$") {
                return .failure(
                    .nestedError(status: 400, code: "UNSUPPORTED_QUERY_PARAM", message: "Unsupported parameter \(key)"))
            } else if reserved.contains(key) || !object.isKnownField(key) {
                let hint = hints[key].map { " (did you mean `\($0)`?)" } ?? ""
                return .failure(
                    .error(
                        status: 400, code: "INVALID_FIELD", message: "Unknown field \(key)\(hint)",
                        extra: [("field", .string(key))]))
            } else {
                implicit.append((key, value))
            }
        }
        for (slot, entries) in values where entries.count > 1 {
            let distinctValues = Set(entries.map(\.1))
            let distinctKeys = Set(entries.map(\.0))
            if slot == "where" && distinctKeys.count == 1 {
                return .failure(
                    .nestedError(status: 400, code: "INVALID_FILTER", message: "filter given more than once"))
            }
            if distinctKeys.count > 1 && distinctValues.count > 1 {
                return .failure(
                    .nestedError(
                        status: 400, code: "INVALID_REQUEST", message: "\(slot) given twice with different values"))
            }
            if distinctKeys.count == 1 && slot != "fields" && slot != "expand" {
                return .failure(
                    .nestedError(status: 400, code: "VALIDATION_ERROR", message: "\(entries[0].0) given more than once")
                )
            }
        }
        var result = ListQuery()
        var conditions: [Condition] = []
        if let raw = values["where"]?.first?.1, !raw.trimmed().isEmpty {
            guard let json = try? JSONValue.parse(raw) else {
                return .failure(.error(status: 400, code: "INVALID_FILTER", message: "filter must be JSON"))
            }
            do {
                conditions.append(try FilterParser.parse(json))
            } catch {
                return .failure(.error(status: 400, code: "INVALID_FILTER", message: error.message))
            }
        }
        for (key, value) in implicit {
            conditions.append(
                .compare(field: key, op: .eq, operand: .value(implicitValue(value, field: object.field(key)))))
        }
        if !conditions.isEmpty {
            result.condition = (conditions.count == 1 ? conditions[0] : .all(conditions)).typed(for: object)
        }
        if let failure = checkFields(result.condition, object: object) { return .failure(failure) }

        if let entries = values["fields"] {
            let fields = entries.flatMap { $0.1.split(separator: ",").map { String($0).trimmed() } }.filter {
                !$0.isEmpty
            }
            if let unknown = fields.first(where: { !object.isKnownField($0) }) {
                return .failure(
                    .error(
                        status: 400, code: "INVALID_FIELD", message: "Unknown field \(unknown)",
                        extra: [("field", .string(unknown))]))
            }
            result.fields = fields
        }
        if let raw = values["orderBy"]?.first?.1 {
            switch parseSort(raw.split(separator: ",").map(String.init), object: object) {
            case .success(let keys): result.sort = keys
            case .failure(let response): return .failure(response)
            }
        }
        if let raw = values["limit"]?.first?.1 {
            guard let limit = Int(raw), limit >= 0 else {
                return .failure(
                    .nestedError(status: 400, code: "VALIDATION_ERROR", message: "top must be a whole number"))
            }
            result.limit = limit
        }
        if let raw = values["offset"]?.first?.1 {
            guard let offset = Int(raw), offset >= 0 else {
                return .failure(
                    .nestedError(status: 400, code: "VALIDATION_ERROR", message: "skip must be a whole number"))
            }
            result.offset = offset
        }
        if values["count"]?.first?.1 == "false" { result.count = false }
        result.search = values["search"]?.first?.1
        return .success(result)
    }

    static func implicitValue(_ raw: String, field: FieldDefinition?) -> JSONValue {
        switch field?.type {
        case "number", "currency", "percent": return Double(raw).map(JSONValue.number) ?? .string(raw)
        case "boolean": return raw == "true" ? .bool(true) : (raw == "false" ? .bool(false) : .string(raw))
        default: return .string(raw)
        }
    }

    static func checkFields(_ condition: Condition?, object: ObjectDefinition) -> CoreResponse? {
        guard let condition else { return nil }
        if let unknown = condition.fields.first(where: { !object.isKnownField($0) }) {
            return .error(
                status: 400, code: "INVALID_FIELD", message: "Unknown field \(unknown)",
                extra: [("field", .string(unknown))])
        }
        return nil
    }

    enum SortOutcome {
        case success([SortKey])
        case failure(CoreResponse)
    }

    static func parseSort(_ items: [String], object: ObjectDefinition) -> SortOutcome {
        var keys: [SortKey] = []
        for item in items.map({ $0.trimmed() }) where !item.isEmpty {
            var field = item
            var descending = false
            if field.hasPrefix("-") {
                descending = true
                field.removeFirst()
            } else if field.hasPrefix("+") {
                field.removeFirst()
            }
            let parts = field.split(separator: " ").map(String.init)
            if parts.count == 2 {
                field = parts[0]
                switch parts[1].lowercased() {
                case "asc": descending = false
                case "desc": descending = true
                default: return .failure(.error(status: 400, code: "INVALID_SORT", message: "bad sort direction"))
                }
            }
            if field.contains(":") || field.contains(".") || !object.isKnownField(field) {
                return .failure(.error(status: 400, code: "INVALID_SORT", message: "cannot sort by \(field)"))
            }
            keys.append(SortKey(field: field, descending: descending))
        }
        return .success(keys)
    }

    /// POST /data/:object/query body.
    static func parse(body: JSONValue, object: ObjectDefinition) -> Outcome {
        var result = ListQuery()
        for key in ["cursor", "joins", "windowFunctions", "distinct"] where body[key] != nil {
            return .failure(.error(status: 400, code: "INVALID_QUERY", message: "\(key) is not supported"))
        }
        if let name = body["object"]?.stringValue, name != object.name {
            return .failure(
                .error(status: 400, code: "QUERY_OBJECT_MISMATCH", message: "body object differs from the path"))
        }
        if let filter = body["where"] ?? body["filter"] {
            do {
                result.condition = try FilterParser.parse(filter).typed(for: object)
            } catch {
                return .failure(.error(status: 400, code: "INVALID_FILTER", message: error.message))
            }
            if let failure = checkFields(result.condition, object: object) { return .failure(failure) }
        }
        if let fields = body["fields"]?.arrayValue {
            let names = fields.compactMap(\.stringValue)
            if let unknown = names.first(where: { !object.isKnownField($0) }) {
                return .failure(
                    .error(
                        status: 400, code: "INVALID_FIELD", message: "Unknown field \(unknown)",
                        extra: [("field", .string(unknown)), ("object", .string(object.name))]))
            }
            result.fields = names
        }
        if let orderBy = body["orderBy"] {
            var items: [String] = []
            switch orderBy {
            case .array(let nodes):
                for node in nodes {
                    if let text = node.stringValue {
                        items.append(text)
                    } else if let field = node["field"]?.stringValue {
                        if node["direction"] != nil {
                            return .failure(
                                .error(status: 400, code: "INVALID_SORT", message: "use order, not direction"))
                        }
                        items.append((node["order"]?.stringValue == "desc" ? "-" : "") + field)
                    } else {
                        return .failure(.error(status: 400, code: "INVALID_SORT", message: "bad sort node"))
                    }
                }
            case .object(let members):
                for (field, direction) in members { items.append((direction.stringValue == "desc" ? "-" : "") + field) }
            case .string(let text): items = text.split(separator: ",").map(String.init)
            default: return .failure(.error(status: 400, code: "INVALID_SORT", message: "bad orderBy"))
            }
            switch parseSort(items, object: object) {
            case .success(let keys): result.sort = keys
            case .failure(let response): return .failure(response)
            }
        }
        if let limit = body["limit"]?.numberValue { result.limit = max(0, Int(limit)) }
        if let offset = body["offset"]?.numberValue { result.offset = max(0, Int(offset)) }
        result.search = body["search"]?.stringValue
        return .success(result)
    }
}
