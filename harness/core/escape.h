// Escaping for the text formats: every string from a store (op names, config names, reasons,
// host names) reaches reports through these, so a hostile or odd string cannot break a file.
#pragma once
#include <string>

namespace d9m {

// XML and HTML text and attribute values: & < > " ' become entities; control characters other
// than tab and newline (not allowed in XML 1.0) become U+FFFD.
std::string xml_escape(const std::string& s);

// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF; quotes doubled. A
// leading = + - @ is prefixed with ' so that spreadsheets do not evaluate it as a formula.
std::string csv_field(const std::string& s);

}  // namespace d9m
