/// Objects shaped like the fixtures of ObjectStack's filter conformance tables
/// (`Tests/Conformance/*.json`), served only with `--conformance-objects`, so that the same cases can
/// be run against this server over HTTP and against ostack's local mirror.
extension ObjectDefinition {
    public static let conformance: [ObjectDefinition] = [
        table("conf_logic", text: ["a", "b", "c", "d", "owner", "status", "parent_object", "parent_id"]),
        table("conf_page", text: ["status", "name"], typed: [("rank", "number")]),
        table("conf_temporal", text: [], typed: [("at", "datetime"), ("on", "date")]),
        table("conf_time", text: [], typed: [("at", "time")]),
        table("conf_text", text: ["name"]),
        table("conf_comparand", text: ["label", "note"], typed: [("qty", "number"), ("active", "boolean")]),
        table(
            "conf_cross", text: ["stage", "owner"],
            typed: [("amount", "number"), ("budget", "number"), ("starts_on", "date"), ("ends_on", "date")]),
    ]

    static func table(_ name: String, text: [String], typed: [(String, String)] = []) -> ObjectDefinition {
        let fields = text.map { ($0, "text") } + typed
        return ObjectDefinition(
            name: name, label: name, pluralLabel: name, idPrefix: name, nameField: fields.first?.0 ?? "id",
            fields: fields.map { FieldDefinition($0.0, $0.1, $0.0) })
    }
}
