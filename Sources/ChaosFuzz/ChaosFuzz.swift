#if FUZZING
import Foundation

/// libFuzzer's driver (`make fuzz` builds with `-sanitize=fuzzer,address -DFUZZING`); the target comes from
/// `CHAOS_FUZZ_TARGET`, the rest of the command line is libFuzzer's.
@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The target this process fuzzes, read once.
private let selectedTarget = FuzzTarget(rawValue: ProcessInfo.processInfo.environment["CHAOS_FUZZ_TARGET"] ?? "")

/// libFuzzer's usual entry point (its own `main`, linked in with the fuzzer runtime, names it).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selectedTarget?.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

@main
struct ChaosFuzz {
    static func main() {
        guard selectedTarget != nil else {
            print("set CHAOS_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
            exit(2)
        }
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv) { data, size in fuzzOne(data, size) })
    }
}
#else
import Foundation

/// `chaos-fuzz replay DIR`: runs every target on every file of `DIR/<target>/` (the seed corpora and the inputs that
/// once crashed), so a regression fails `make test` without a fuzzer build. Prints what it ran; exit 0.
@main
struct ChaosFuzz {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.count == 2, arguments.first == "replay", let root = arguments.last else {
            print("usage: chaos-fuzz replay DIR   (DIR/<target>/ for targets \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")))")
            exit(2)
        }
        var total = 0
        for target in FuzzTarget.allCases {
            let directory = URL(fileURLWithPath: root).appendingPathComponent(target.rawValue)
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
            for name in names {
                guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { continue }
                target.run(Array(data))
                total += 1
            }
            print("\(target.rawValue): \(names.count) input(s) replayed")
        }
        print("replayed \(total) input(s) without a crash")
    }
}
#endif
