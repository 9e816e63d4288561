// The `d9m` command line (DESIGN.md "CLI"), one function per verb. Each verb's file adds its
// subcommand with the options it owns and returns what to run once they are parsed; main.cpp
// only parses, dispatches and turns errors into exit codes (core/error.h):
// 0 every claim held, 1 a claim was broken or the evidence does not verify, 2 bad usage or bad
// input, 3 environment problem.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace d9m::cli {

struct Verb {
  CLI::App* command;        // parsed when this verb was named
  std::function<int()> run;  // the verb, over its own options
};

// `argv` is the whole command line, recorded with every run.
void add_list(CLI::App& app, std::vector<Verb>& verbs);
void add_fingerprint(CLI::App& app, std::vector<Verb>& verbs);
void add_run(CLI::App& app, std::vector<Verb>& verbs, const std::vector<std::string>& argv);
void add_worker(CLI::App& app, std::vector<Verb>& verbs);
void add_report(CLI::App& app, std::vector<Verb>& verbs);
void add_merge(CLI::App& app, std::vector<Verb>& verbs);
void add_diff(CLI::App& app, std::vector<Verb>& verbs);
void add_baseline(CLI::App& app, std::vector<Verb>& verbs);
void add_attest(CLI::App& app, std::vector<Verb>& verbs);
void add_verify(CLI::App& app, std::vector<Verb>& verbs);
void add_trace(CLI::App& app, std::vector<Verb>& verbs);
void add_exec(CLI::App& app, std::vector<Verb>& verbs, const std::vector<std::string>& argv);

}  // namespace d9m::cli
