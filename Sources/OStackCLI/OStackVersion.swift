/// The version printed by `ostack --version`.
public enum OStackVersion {
    public static let current = "0.1.0-dev"
}
