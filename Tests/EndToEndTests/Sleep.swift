import Glibc

func timespecLite(_ seconds: Double) -> timespec {
    timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
}

func nanosleepLite(_ spec: inout timespec) -> Int32 { nanosleep(&spec, nil) }
