// Console output. Progress bars and logs go to one stream: stdout by default (as Keras prints), stderr in
// the command-line tool (results go to stdout there).
#pragma once

#include <cstdio>
#include <string>

namespace systolic {

void set_log_stream(std::FILE* stream);
std::FILE* log_stream();
// Writes text as is (no newline added) and flushes.
void log_write(const std::string& text);
void log_line(const std::string& text);
// Whether the log stream is a terminal (for the dynamic progress bar).
bool log_is_terminal();

}  // namespace systolic
