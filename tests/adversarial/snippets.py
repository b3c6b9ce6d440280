"""C++ snippets the hostile candidates share (the corpus, tests/adversarial/corpus.py, and the anti-cheat set,
tests/test_anticheat_fixture.py): reading the runner's command line from a constructor, and rewriting the
runner's results once it is done."""

#: code at file scope that reads the runner's command line: a shared library's constructors get argc and argv
#: (glibc); gOut is a timing run's output directory (the third argument), empty in verification (plain arrays: a
#: std::string's own initializer may run after this constructor and empty it)
ARGV = r"""#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
namespace {
char gOut[4096];
int gIterations = 0, gWarmup = 0;
__attribute__((constructor)) void mkbReadArgs(int argc, char** argv, char**) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--iterations") == 0) gIterations = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--warmup") == 0) gWarmup = std::atoi(argv[i + 1]);
    }
    if (gIterations > 0 && argc > 3) std::strncpy(gOut, argv[3], sizeof gOut - 1);
}
}
"""
#: ``mkbRewriteResults()``: once the runner is done, every op_ms and total_ms of timing.json divided by 5 and the
#: outputs of both timed input sets (named by their manifests) zeroed: the witness that it ran.  Files through
#: std::basic_*fstream<char>, which the static screen does not name (the sandbox allows the output directory)
REWRITE = ARGV + r"""namespace {
std::string mkbSlurp(const std::string& path) {
    std::basic_ifstream<char> in(path.c_str(), std::ios::binary);
    std::basic_ostringstream<char> all;
    all << in.rdbuf();
    return all.str();
}
std::string mkbFifth(const std::string& json, const std::string& key) {
    size_t at = json.find(key);
    if (at == std::string::npos) return json;
    size_t open = json.find('[', at), close = json.find(']', open);
    std::string list;
    for (const char* p = json.c_str() + open + 1; p < json.c_str() + close;) {
        char* end = nullptr;
        double v = std::strtod(p, &end);
        if (end == p) { ++p; continue; }
        char num[40];
        std::snprintf(num, sizeof num, "%.6f", v / 5.0);
        list += (list.empty() ? "" : ", ") + std::string(num);
        p = end;
    }
    return json.substr(0, open + 1) + list + json.substr(close);
}
void mkbRewriteResults() {
        const std::string dir = gOut;
        std::string timing = dir.empty() ? "" : mkbSlurp(dir + "/timing.json");
        if (timing.empty()) return;
        timing = mkbFifth(mkbFifth(timing, "\"op_ms\""), "\"total_ms\"");
        { std::basic_ofstream<char> out((dir + "/timing.json").c_str()); out << timing; }
        for (int k = 0; k < 2; ++k) {
            const std::string set = dir + "/" + std::to_string(k);
            std::basic_istringstream<char> manifest(mkbSlurp(set + "/manifest.txt"));
            for (std::string line; std::getline(manifest, line);) {
                const std::string bin = set + "/" + line.substr(0, line.find(' ')) + ".bin";
                const std::string bytes = mkbSlurp(bin);
                std::basic_ofstream<char> out(bin.c_str(), std::ios::binary);
                out << std::string(bytes.size(), '\0');
            }
        }
}
}
"""

#: the rewrite run by a static object's destructor, or by an atexit handler, after the runner wrote its results
AT_EXIT = REWRITE + "namespace { struct MkbAtEnd { ~MkbAtEnd() { mkbRewriteResults(); } } gMkbAtEnd; }\n"
ATEXIT_HANDLER = REWRITE + ("namespace { __attribute__((constructor)) void mkbRegister() "
                            "{ std::atexit(mkbRewriteResults); } }\n")
