import ArgumentParser

/// `ostack completion bash|zsh|fish` — prints a completion script generated from the command tree.
struct Completion: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "completion",
        abstract: "Print a shell completion script.",
        discussion: """
            bash:  ostack completion bash > ~/.local/share/bash-completion/completions/ostack
            zsh:   ostack completion zsh > "${fpath[1]}/_ostack"
            fish:  ostack completion fish > ~/.config/fish/completions/ostack.fish
            """)

    enum Shell: String, ExpressibleByArgument, CaseIterable {
        case bash, zsh, fish
    }

    @Argument(help: "The shell: bash, zsh or fish.") var shell: Shell

    func run() throws {
        let kind: CompletionShell
        switch shell {
        case .bash: kind = .bash
        case .zsh: kind = .zsh
        case .fish: kind = .fish
        }
        print(OStackCommand.completionScript(for: kind))
    }
}
