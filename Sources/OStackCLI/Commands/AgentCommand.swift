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
                if global.json {
                    context.terminal.out("{\"running\":false}\n")
                } else {
                    context.terminal.out("The agent is not running.\n")
                }
                return
            }
            context.terminal.out(global.json ? status + "\n" : "The agent is running: \(status)\n")
        }
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
            let stopped = client.stop()
            context.emit(
                json: ["stopped": stopped], human: stopped ? "The agent stopped." : "The agent was not running.")
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
