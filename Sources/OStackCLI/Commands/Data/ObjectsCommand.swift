import ArgumentParser
import OStackCore

/// `ostack objects list|show NAME` — object metadata, cached per account (docs/sync.md, "Metadata").
struct ObjectsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "objects", abstract: "List objects and show their fields.", subcommands: [List.self, Show.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the objects of the account's server.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let (json, stale) = try context.selectedSession().metadata.objectList()
                let items = json["items"]?.arrayValue ?? []
                let objects = items.compactMap { item -> ObjectDocument? in
                    guard let name = item["name"]?.stringValue, ObjectSchema.isIdentifier(name) else { return nil }
                    return ObjectDocument(name: name, label: item["label"]?.stringValue ?? name)
                }.sorted { $0.name < $1.name }
                if stale { context.note("Offline: showing cached metadata.") }
                struct Document: Encodable { var objects: [ObjectDocument] }
                context.emit(json: Document(objects: objects)) {
                    Table(headers: ["name", "label"], rows: objects.map { [$0.name, $0.label] }).render(
                        terminal: context.terminal)
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show an object's fields.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object's name, e.g. task.", completion: ShellCompletions.objects) var name: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let cached = try context.selectedSession().metadata.object(name)
                if cached.stale { context.note("Offline: showing cached metadata.") }
                let schema = cached.schema
                struct Field: Encodable {
                    var name, type, label: String
                    var required: Bool
                    var options: [String]?
                }
                struct Document: Encodable {
                    var name, label: String
                    var fields: [Field]
                    var schemaVersion: Int
                }
                let fields = schema.fields.map {
                    Field(
                        name: $0.name, type: $0.type, label: $0.label, required: $0.required,
                        options: $0.options.isEmpty ? nil : $0.options)
                }
                let document = Document(
                    name: schema.name, label: schema.label, fields: fields, schemaVersion: cached.schemaVersion)
                context.emit(json: document) {
                    ErrorPresenter.sanitize("\(schema.label) (\(schema.name))") + "\n"
                        + Table(
                            headers: ["field", "type", "label", "required", "constraints"],
                            rows: schema.fields.map { field in
                                [
                                    field.name, field.type, field.label, field.required ? "yes" : "",
                                    Self.constraints(field),
                                ]
                            }
                        ).render(terminal: context.terminal)
                }
            }
        }

        static func constraints(_ field: ObjectSchema.FieldSchema) -> String {
            var parts: [String] = []
            if !field.options.isEmpty { parts.append("one of " + field.options.joined(separator: "|")) }
            if let min = field.min { parts.append("min \(FieldValidator.format(min))") }
            if let max = field.max { parts.append("max \(FieldValidator.format(max))") }
            if let length = field.maxLength { parts.append("≤ \(length) chars") }
            if let scale = field.scale { parts.append("\(scale) decimals") }
            return parts.joined(separator: ", ")
        }
    }
}

struct ObjectDocument: Encodable {
    var name: String
    var label: String
}

/// `ostack apps list` — the apps the user may enter (`GET /api/v1/me/apps`).
struct AppsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps", abstract: "List apps.", subcommands: [List.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the apps you may open.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                let (json, stale) = try session.metadata.apps()
                if stale { context.note("Offline: showing the cached list.") }
                if session.account.credentialKind == .apiKey && (json["apps"]?.arrayValue ?? []).isEmpty {
                    context.note("The server lists apps for signed-in users only, not for API keys.")
                }
                struct App: Encodable {
                    var name, label: String
                    var isDefault: Bool
                }
                let apps = (json["apps"]?.arrayValue ?? []).compactMap { item -> App? in
                    guard let name = item["name"]?.stringValue else { return nil }
                    return App(
                        name: name, label: item["label"]?.stringValue ?? name,
                        isDefault: item["isDefault"]?.boolValue ?? false)
                }
                struct Document: Encodable { var apps: [App] }
                context.emit(json: Document(apps: apps)) {
                    Table(
                        headers: ["name", "label", "default"],
                        rows: apps.map { [$0.name, $0.label, $0.isDefault ? "yes" : ""] }
                    )
                    .render(terminal: context.terminal)
                }
            }
        }
    }
}
