// Rules of the source tree that no compiler checks, read from the sources (SYSTOLIC_SOURCE_DIR):
// - every op of the list SYSTOLIC_OPS (include/systolic/ops.h) is defined in the file of the same family on each
//   backend: src/ops/cpu/<family>.cc, src/ops/cuda/<family>.cu or .cc and src/ops/xla/<family>.cc
//   (docs/architecture.md, "Adding an op").
//   An op's definition is its `const DTypes <name>_dtypes` at the start of a line, which the backend's file of the
//   op holds (helper files such as onednn_conv.cc or dnn_kernels.cu define no op entry);
// - layers and the model reach the backends through the op entry points only: no file of src/layers or src/model
//   includes ops/cpu/ or ops/cuda/.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kSource = SYSTOLIC_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names of the ops of SYSTOLIC_OPS, in the list's order.
std::vector<std::string> op_list() {
  std::istringstream in(read(kSource / "include/systolic/ops.h"));
  std::vector<std::string> ops;
  const std::regex entry(R"(\bX\((\w+),)");
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (!in_list) {
      in_list = line.rfind("#define SYSTOLIC_OPS(X)", 0) == 0;
      continue;
    }
    for (std::sregex_iterator m(line.begin(), line.end(), entry), end; m != end; ++m) ops.push_back((*m)[1]);
    if (line.empty() || line.back() != '\\') break;  // the macro's last line
  }
  return ops;
}

// For each op a backend defines: the files (relative to the source root) that define it.
std::map<std::string, std::vector<std::string>> definitions(const std::string& backend) {
  std::map<std::string, std::vector<std::string>> found;
  const std::regex dtypes(R"(^const DTypes (\w+)_dtypes\b)", std::regex::multiline);
  for (const auto& e : fs::directory_iterator(kSource / "src/ops" / backend)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cc" && ext != ".cu") continue;
    const std::string text = read(e.path());
    for (std::sregex_iterator m(text.begin(), text.end(), dtypes), end; m != end; ++m)
      found[(*m)[1]].push_back("src/ops/" + backend + "/" + e.path().filename().string());
  }
  return found;
}

std::string family_of(const std::string& file) {
  return fs::path(file).stem().string();
}

}  // namespace

TEST(SourceLayout, EveryOpIsDefinedInTheSameFamilyOnEveryBackend) {
  const std::vector<std::string> ops = op_list();
  ASSERT_GE(ops.size(), 50u) << "the list SYSTOLIC_OPS was not found in include/systolic/ops.h";
  const auto cpu = definitions("cpu"), cuda = definitions("cuda"), xla = definitions("xla");
  for (const std::string& op : ops) {
    auto only = [&](const std::map<std::string, std::vector<std::string>>& defs, const std::string& backend) {
      auto it = defs.find(op);
      if (it == defs.end()) {
        ADD_FAILURE() << "op " << op << ": no file of src/ops/" << backend << " defines " << op << "_dtypes";
        return std::string();
      }
      if (it->second.size() > 1) {
        std::string files;
        for (const auto& f : it->second) files += " " + f;
        ADD_FAILURE() << "op " << op << " is defined more than once on the " << backend
                      << " backend:" << files;
      }
      return it->second.front();
    };
    const std::string c = only(cpu, "cpu"), g = only(cuda, "cuda"), x = only(xla, "xla");
    if (!c.empty() && !g.empty())
      EXPECT_EQ(family_of(c), family_of(g)) << "op " << op << " is defined in " << c << " and " << g
                                            << ": the family files must have the same name";
    if (!c.empty() && !x.empty())
      EXPECT_EQ(family_of(c), family_of(x)) << "op " << op << " is defined in " << c << " and " << x
                                            << ": the family files must have the same name";
  }
  // Nothing but the list's ops has an entry.
  for (const auto* defs : {&cpu, &cuda, &xla})
    for (const auto& [name, files] : *defs)
      EXPECT_NE(std::find(ops.begin(), ops.end(), name), ops.end())
          << files.front() << " defines " << name << "_dtypes, which is no op of SYSTOLIC_OPS";
}

TEST(SourceLayout, LayersAndTheModelIncludeNoBackend) {
  const std::regex backend_include(R"(#include\s+"ops/(cpu|cuda)/)");
  int files = 0;
  for (const char* dir : {"src/layers", "src/model"})
    for (const auto& e : fs::recursive_directory_iterator(kSource / dir)) {
      if (!e.is_regular_file()) continue;
      ++files;
      const std::string text = read(e.path());
      EXPECT_FALSE(std::regex_search(text, backend_include))
          << fs::relative(e.path(), kSource).string()
          << " includes a backend's header (ops/cpu/ or ops/cuda/): go through the op entry points (ops.h) "
             "or a "
             "src/ops/ header";
    }
  EXPECT_GT(files, 10);
}
