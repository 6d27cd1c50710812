import ArgumentParser
import OStackCore

/// Options every command accepts (docs/commands.md, "Global options").
public struct GlobalOptions: ParsableArguments, Sendable {
    @Option(
        name: .long, help: ArgumentHelp("The account to use: id, alias, or email@host.", valueName: "account"),
        completion: ShellCompletions.accounts)
    public var account: String?

    @Flag(name: .long, help: "Print one JSON document on stdout (errors as JSON on stderr).")
    public var json = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How lists print: table, tsv, csv, json or ndjson (default: table on a terminal, tsv otherwise); export and import: csv, json or ndjson.",
            valueName: "format"))
    public var format: OutputFormat?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Filter the JSON output with a jq expression (implies --json).", valueName: "expression"))
    public var jq: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Render the JSON output with a template, e.g. '{{range .records}}{{.id}}{{\"\\n\"}}{{end}}' (implies --json).",
            valueName: "template"))
    public var template: String?

    @Flag(name: .customLong("no-input"), help: "Never prompt; fail if input would be needed.")
    public var noInput = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long to wait for the server per request, e.g. 10s or 2m (default 60s; seconds if no unit).",
            valueName: "duration"))
    public var timeout: String?

    @Flag(name: .long, help: "Add HTTP status and request ids to error output.")
    public var verbose = false

    @Flag(name: .customLong("no-color"), help: "Do not use colors (also: NO_COLOR).")
    public var noColor = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keyring backend for new accounts: secret-service (default) or file (also OSTACK_KEYRING_BACKEND).",
            valueName: "backend"))
    public var keyring: String?

    public init() {}

    /// Options for a command line answered without the parser (`EarlyCommand`, shell completions).
    /// Every property is set here: reading an option that was neither parsed nor set traps, so a
    /// new option must be added here too (`CommandTreeTests` reads them all).
    public static func unparsed(
        account: String? = nil, json: Bool = false, noInput: Bool = false, verbose: Bool = false,
        noColor: Bool = false
    ) -> GlobalOptions {
        var global = GlobalOptions()
        global.account = account
        global.json = json
        global.format = nil
        global.jq = nil
        global.template = nil
        global.noInput = noInput
        global.timeout = nil
        global.verbose = verbose
        global.noColor = noColor
        global.keyring = nil
        return global
    }

    public func validate() throws {
        // `--account "$ACCT"` with an empty variable must not act on another account.
        if let account, account.trimmingWhitespace().isEmpty {
            throw ValidationError("--account needs an account: an alias, an id or an e-mail address.")
        }
        if jq != nil && template != nil { throw ValidationError("Pass --jq or --template, not both.") }
        if let template {
            do { _ = try Template(template) } catch { throw ValidationError("--template: \(error.message).") }
        }
        if let timeout, timeoutSeconds == nil {
            throw ValidationError("--timeout takes a duration such as 10s or 2m, not '\(timeout)'.")
        }
    }

    /// Whether `--format` agrees with `--json`, `--jq` and `--template`, which ask for JSON output.
    /// Checked when the command runs (`CommandRunner`), not in `validate`: `records import` reads
    /// its `--format` as the input's and passes these options on without it, so
    /// `records import task - --format csv --json` is fine.
    func checkOutputFormat() throws {
        if json, let format, format != .json, format != .ndjson {
            throw ValidationError("Pass --json or --format \(format), not both.")
        }
        if jq != nil || template != nil, let format, format != .json {
            throw ValidationError("--jq and --template filter JSON: they do not go with --format \(format).")
        }
    }

    /// `--timeout` in seconds (at least 1 s, at most 30 days), nil when not given.
    public var timeoutSeconds: Double? { timeout.flatMap(Setting.duration) }

    /// Whether errors and warnings on stderr are JSON documents: asked for with `--json` or
    /// `--format json`; `--jq` and `--template` alone are read by a person, so theirs are not.
    public var jsonErrors: Bool { explicitJSON ?? (json || format == .json) }

    /// Set by `CommandContext.live` before `json` is widened to every JSON-producing option.
    public var explicitJSON: Bool?

    /// Whether the output is one JSON document (`--json` or `--format json`).
    public var wantsJSON: Bool { json || format == .json || format == .ndjson || jq != nil || template != nil }
}

extension OutputFormat: ExpressibleByArgument {}
