import ArgumentParser
import OStackCore

/// `ostack agent [--foreground]`, `ostack agent status`, `ostack agent stop` (docs/storage.md, "The agent").
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "The background process that holds unlocked keys and locks them again after inactivity.",
        subcommands: [AgentStart.self, AgentStatus.self, AgentStop.self], defaultSubcommand: AgentStart.self)
}

struct AgentStart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start", abstract: "Start the agent (unlock does this on demand).")
    @OptionGroup var global: GlobalOptions
    @Flag(name: .long, help: ArgumentHelp("Serve in this process.", visibility: .hidden)) var foreground = false

    func run() async throws {
        try await CommandRunner.run(global) { context in
            // Not in another user's home (`sudo -E`): its runtime directory would become ours.
            try context.layout.checkHome()
            let client = AgentClient(
                layout: context.layout, namespaces: KeyringNamespaces(environment: context.environment))
            if foreground {
                try context.layout.createRuntimeDirectoryOrThrow()
                let server: AgentServer
                do {
                    server = try AgentServer(socketPath: client.socketPath)
                } catch let error as OStackError where error.code == .invalidInput {
                    _ = error
                    return  // another agent already serves this socket
                }
                server.run()
                return
            }
            try client.ensureRunning(environment: context.environment)
            context.emit(json: ["running": true], human: "The agent is running.")
        }
    }
}

struct AgentStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show what the agent holds.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let client = AgentClient(
                layout: context.layout, namespaces: KeyringNamespaces(environment: context.environment))
            guard let status = client.status() else {
                if context.global.json {
                    context.terminal.out("{\"running\":false}\n")
                } else {
                    context.terminal.out("The agent is not running.\n")
                }
                return
            }
            let parsed = JSONValue.parse(Array(status.utf8))
            let accounts = try context.registry.accounts()
            struct Held: Encodable {
                var account: AccountReference?
                /// What else the agent holds (the `file-keyring` passphrase key), when not an account.
                var item: String?
                var idleSecondsLeft: Int
                var lifetimeSecondsLeft: Int
            }
            struct Document: Encodable {
                var running = true
                var pid: Int?
                var dumpable: Bool?
                var accounts: [Held]
            }
            let held = (parsed?["accounts"]?.arrayValue ?? []).map { entry in
                let name = entry["account"]?.stringValue ?? ""
                let account = accounts.first { $0.id.rawValue == name }
                return Held(
                    account: account.map(AccountReference.init),
                    item: account == nil ? ErrorPresenter.sanitize(name, maxLength: 64) : nil,
                    idleSecondsLeft: entry["idleSecondsLeft"]?.intValue ?? 0,
                    lifetimeSecondsLeft: entry["lifetimeSecondsLeft"]?.intValue ?? 0)
            }
            let document = Document(
                pid: parsed?["pid"]?.intValue, dumpable: parsed?["dumpable"]?.boolValue, accounts: held)
            context.emit(json: document) {
                var text = "The agent is running"
                if let pid = document.pid {
                    text += " (pid \(pid)\(document.dumpable == false ? ", not dumpable" : ""))"
                }
                text += held.isEmpty ? " and holds no unlocked account.\n" : ".\n"
                for entry in held {
                    let name =
                        entry.account.map { ErrorPresenter.sanitize($0.alias, maxLength: 64) } ?? entry.item ?? "?"
                    text +=
                        "\(name): unlocked; locks after \(Self.duration(entry.idleSecondsLeft)) idle, "
                        + "at the latest in \(Self.duration(entry.lifetimeSecondsLeft))\n"
                }
                return text
            }
        }
    }

    /// `45 s`, `14 min`, `7 h 59 min`.
    static func duration(_ seconds: Int) -> String {
        let seconds = max(0, seconds)
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min" }
        let minutes = (seconds % 3600) / 60
        return "\(seconds / 3600) h" + (minutes > 0 ? " \(minutes) min" : "")
    }
}

struct AgentStop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop", abstract: "Forget every key and stop the agent.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let client = AgentClient(
                layout: context.layout, namespaces: KeyringNamespaces(environment: context.environment))
            let outcome = try client.stop()
            let human =
                switch outcome {
                case nil: "The agent was not running."
                case .stopped:
                    "The agent did not answer within \(Int(AgentClient.answerTimeout)) seconds and was killed; every account is locked."
                default: "The agent stopped."
                }
            context.emit(json: ["stopped": outcome != nil], human: human)
        }
    }
}

extension FileLayout {
    func createRuntimeDirectoryOrThrow() throws(OStackError) {
        do {
            try createRuntimeDirectory()
        } catch {
            throw OStackError.storage(error, role: "the agent's runtime directory")
        }
    }
}
