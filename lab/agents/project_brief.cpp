// The chain workload's project brief: a long, realistic-looking shared document that a planner and
// its executors all read (prose, numbered requirements, tables with numbers, a dated log).
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "persona_text.h"
#include "util/status.h"

namespace agentkv::text {

namespace {

using Words = std::vector<std::string>;

struct Domain {
  const char* project;
  const char* client;
  const char* system;
  const char* legacy;
  const char* items;  // plural
  const char* site;
  const char* sites;
  Words components;
};

const std::vector<Domain> kDomains = {
    {"Inventory system migration", "Harborview Logistics", "the new inventory system",
     "the old spreadsheet tracker", "stock records", "warehouse", "warehouses",
     {"the import pipeline", "the barcode scanner app", "the reporting dashboard", "the supplier API",
      "the nightly backup job", "the access control module"}},
    {"Library digitization", "the Regional Library Network", "the digital catalogue",
     "the card catalogue database from 1998", "book records", "branch library", "branch libraries",
     {"the scanning workstation software", "the OCR pipeline", "the public search portal",
      "the metadata editor", "the loan system bridge", "the storage archive"}},
    {"Clinic scheduling platform", "the Northshore Health Cooperative", "the scheduling platform",
     "the paper appointment books", "appointments", "clinic", "clinics",
     {"the booking web app", "the SMS reminder service", "the staff rota planner", "the patient record link",
      "the waiting-room display", "the audit log"}},
    {"Solar farm monitoring", "Sunfield Energy", "the monitoring service", "the vendor's closed portal",
     "sensor readings", "solar farm", "solar farms",
     {"the inverter data collector", "the alerting service", "the weather feed integration",
      "the maintenance ticket system", "the time-series database", "the operator dashboard"}},
    {"School bus routing", "the County School District", "the routing planner", "hand-drawn route maps",
     "student address records", "school", "schools",
     {"the route optimizer", "the parent notification app", "the driver tablet app", "the GPS tracking feed",
      "the address geocoder", "the incident report form"}},
    {"Museum collection catalogue", "the City Museum Trust", "the collection catalogue",
     "index cards and an old desktop database", "object records", "museum site", "museum sites",
     {"the photography workflow", "the loan tracking module", "the public collection website",
      "the condition report form", "the barcode labels", "the rights management module"}},
};

const Words kCities = {"Northport", "Eastfield", "Riverton",  "Hillcrest", "Lakeside", "Oakham",   "Westbury",
                       "Millbrook", "Southgate", "Kingsley", "Ravenwood", "Bayview",  "Greenhill", "Stonehaven"};

const Words kRoles = {"project lead", "data engineer", "backend developer", "trainer",
                      "site coordinator", "QA tester", "security officer", "product owner"};

// Placeholders: {client} {system} {legacy} {items} {site} {sites} {component} {city}, numbers {n}
// {m} {k}, and {spent}, a running total that only grows.
const Words kBackground = {
    "{client} has run its {sites} on {legacy} for more than a decade, and the staff have learned to work "
    "around its gaps.",
    "Last year an audit found that {n} percent of the {items} were duplicated, outdated or impossible to trace.",
    "The board approved {system} in principle, on the condition that daily work at the {sites} is not disrupted.",
    "Earlier attempts stalled because nobody owned the data cleanup and the {sites} used different conventions.",
    "The project is funded for one year, with a review by the board after the first {m} months.",
    "Staff at the {sites} are supportive but skeptical, and many remember the failed rollout of {component} "
    "three years ago."};

const Words kProjectGoals = {"Move every active record of {legacy} into {system} without loss.",
                      "Cut the time staff spend on manual bookkeeping by at least {n} percent.",
                      "Give the manager of every {site} a live view of the numbers that matter to them.",
                      "Retire {legacy} completely by the end of the year.",
                      "Make {component} reliable enough that nobody keeps a private backup spreadsheet.",
                      "Train every member of staff before their {site} goes live.",
                      "Document the system so that the next team can maintain it without us.",
                      "Keep total spending within the approved budget."};

const Words kRequirements = {
    "{system} must import all {items} from {legacy} and report every record it could not import, with the reason.",
    "Every change to one of the {items} must be logged with the user, the time and the old and new values.",
    "{component} must keep working for at least {m} hours without a network connection and synchronize afterwards.",
    "Search results must appear within {n}0 milliseconds, even at the {sites} with the most data.",
    "Staff must be able to correct a wrong entry in no more than three steps.",
    "{system} must serve at least {n} concurrent users during peak hours.",
    "All personal data must be stored in the region and encrypted at rest.",
    "Each {site} must be able to export its own {items} as a CSV file at any time.",
    "{component} must run on the existing hardware at the {sites}; no new purchases are planned.",
    "Managers must receive a weekly summary by e-mail every Monday before 8:00.",
    "The interface must be usable with a keyboard alone and readable at 200 percent zoom.",
    "Access must follow four roles: staff, site manager, auditor and administrator.",
    "A full backup must run every night, and a restore must be tested once a month.",
    "Duplicates among the {items} must be detected on import and merged only after a person confirms.",
    "{system} must keep the identifiers used by {legacy}, so that old paper references stay valid.",
    "Maintenance downtime must be announced {m} days ahead and stay under two hours."};

const Words kConstraints = {
    "The budget is {n}0 thousand euros in total, and at most a third of it may go to outside contractors.",
    "Go-live at each {site} must avoid the busiest weeks of its year.",
    "Only two developers are available full time; the others can give one day a week.",
    "The IT department will not support any database engine besides PostgreSQL.",
    "{legacy} must stay readable for seven years after the migration, for legal reasons.",
    "No {site} may be without a working system for more than one working day.",
    "Data protection rules forbid copying personal data to laptops.",
    "No staff member may be required to use a personal phone for work.",
    "Every vendor contract must be reviewed by the legal team, which needs {m} weeks per contract.",
    "The board expects a written status report every {m} weeks."};

const Words kRisks = {"The data in {legacy} may be worse than the audit suggested, which would slow the import.",
                      "Key staff at the {sites} might leave before the rollout is finished.",
                      "{component} depends on a vendor that has announced price increases.",
                      "Training may collide with the holiday season.",
                      "Network coverage at the smaller {sites} is unreliable.",
                      "Scope may grow as each {site} asks for its own special features.",
                      "The old identifiers in {legacy} are not unique across {sites}.",
                      "Testing time may be squeezed if the import work runs late."};

const Words kMilestones = {"Data audit complete",   "Import pipeline ready", "Pilot site live",
                           "Staff training done",   "All sites live",        "Legacy system read-only",
                           "Final report to the board"};

const Words kLogEntries = {
    "Kick-off meeting with the managers of all {sites}; agreed on weekly check-ins on Tuesdays.",
    "Exported a sample of {n}00 {items} from {legacy}; {m} percent had missing fields.",
    "Demonstrated a prototype of {component} to the staff in {city}; they liked it but found the font too small.",
    "Found that two {sites} use different codes for the same categories; a mapping table is needed.",
    "The vendor confirmed the price of {component} for the first year only.",
    "Import test run took {m} hours for {n} thousand {items}; most of the time went into duplicate checks.",
    "Legal review of the hosting contract started; expected to take {m} weeks.",
    "Staff in {city} asked whether the old reports stay available; promised an answer by Friday.",
    "Network test at the {city} {site}: only {m} megabits per second upload at peak times.",
    "Backup and restore drill completed; the restore took {m} minutes longer than planned.",
    "Agreed with the staff council that training happens during paid working hours.",
    "Discovered {n} {items} sharing an identifier in {legacy}; flagged them for manual review.",
    "Budget check: {spent} thousand euros spent so far, on track.",
    "The board asked for a clearer timeline for the last {sites}.",
    "Accessibility review of {component}: keyboard navigation works, contrast needs fixing.",
    "Decided to postpone work on {component} until the import is stable.",
    "The manager in {city} volunteered that {site} as the first pilot.",
    "Security review found missing session timeouts in {component}; fixed the same day.",
    "Ran the first full import on the test server: {n} thousand {items} in {m} hours, {k} errors logged.",
    "Met the manager of the {city} {site} about the go-live date; they asked to move it by {m} days.",
    "Wrote the first draft of the training handbook for {component}.",
    "Tested {component} on the oldest computers at the {city} {site}; it starts in {m} seconds.",
    "The legal team approved the data processing agreement after {m} rounds of comments.",
    "Fixed a bug in {component} that dropped {k} {items} during synchronization.",
    "Agreed to freeze the feature list for the first release until the pilot is over."};

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

class BriefWriter {
 public:
  explicit BriefWriter(uint64_t seed) : rng_(derive_seed(seed, kStreamBrief)), d_(rng_.pick(kDomains)) {}

  // A template with the domain's words, a random component and city, and fresh numbers.
  std::string sentence(const std::string& tmpl) {
    if (tmpl.find("{spent}") != std::string::npos) spent_ += rng_.uniform(10, 40);
    return capitalized(fill_template(tmpl, {{"client", d_.client},
                                            {"system", d_.system},
                                            {"legacy", d_.legacy},
                                            {"items", d_.items},
                                            {"site", d_.site},
                                            {"sites", d_.sites},
                                            {"component", rng_.pick(d_.components)},
                                            {"city", rng_.pick(kCities)},
                                            {"n", std::to_string(rng_.uniform(12, 95))},
                                            {"m", std::to_string(rng_.uniform(2, 12))},
                                            {"k", std::to_string(rng_.uniform(100, 999))},
                                            {"spent", std::to_string(spent_)}}));
  }

  // k distinct templates, in list order, as numbered or bulleted lines.
  std::string lines(const Words& list, int k, const std::string& label) {
    std::vector<int> picked = rng_.sample(static_cast<int>(list.size()), k);
    std::sort(picked.begin(), picked.end());
    std::string out;
    for (size_t i = 0; i < picked.size(); ++i) {
      out += (label.empty() ? "-" : label + std::to_string(i + 1) + ".") + " " +
             sentence(list[static_cast<size_t>(picked[i])]) + "\n";
    }
    return out;
  }

  std::string write() {
    const int today = rng_.uniform(0, 364);
    const std::vector<Person> team = make_cast(rng_.next(), rng_.uniform(5, 8));
    std::string out = "PROJECT BRIEF: " + std::string(d_.project) + " for " + d_.client +
                      "\nShared working document for the planner and every executor, as of " + format_date(today) +
                      ".\n\n1. Background\n";
    std::vector<int> para = rng_.sample(static_cast<int>(kBackground.size()), 4);
    for (size_t i = 0; i < para.size(); ++i) {
      if (i > 0) out += ' ';
      out += sentence(kBackground[static_cast<size_t>(para[i])]);
    }
    out += "\n\n2. Team\n";
    std::vector<int> roles = rng_.sample(static_cast<int>(kRoles.size()), static_cast<int>(team.size()));
    for (size_t i = 0; i < team.size(); ++i) out += "- " + team[i].full + ": " + kRoles[static_cast<size_t>(roles[i])] + "\n";
    out += "\n3. Goals\n" + lines(kProjectGoals, rng_.uniform(3, 5), "");
    out += "\n4. Requirements\n" + lines(kRequirements, rng_.uniform(9, 13), "R");
    out += "\n5. Constraints\n" + lines(kConstraints, rng_.uniform(5, 7), "C");
    out += "\n6. Data\n" + site_table(today) + "\n" + milestone_table(today, team);
    out += "\n7. Risks\n" + lines(kRisks, rng_.uniform(3, 5), "");
    out += "\n8. Project log (oldest first)\n";
    // The log fills the brief up to a length drawn from the seed: ~1500-2500 SmolLM2 tokens overall.
    const size_t target = static_cast<size_t>(rng_.uniform(6500, 8900));
    Deck entries(rng_, static_cast<int>(kLogEntries.size()));
    int day = today - 120;
    for (;;) {
      day += rng_.uniform(0, 3);
      const std::string line = "- " + format_date(day) + " \xE2\x80\x94 " + rng_.pick(team).full + ": " +
                               sentence(kLogEntries[static_cast<size_t>(entries.next())]) + "\n";
      if (out.size() + line.size() > target) break;
      out += line;
    }
    return out + "\n";
  }

 private:
  std::string site_table(int today) {
    std::string out = "Table A. " + capitalized(d_.sites) +
                      " in scope\n| Site | Staff | Records (thousands) | Budget (k EUR) | Go-live |\n"
                      "|---|---|---|---|---|\n";
    const int rows = rng_.uniform(6, 10);
    std::vector<int> cities = rng_.sample(static_cast<int>(kCities.size()), rows);
    int go_live = today + rng_.uniform(30, 60);
    for (int c : cities) {
      go_live += rng_.uniform(7, 21);
      out += "| " + kCities[static_cast<size_t>(c)] + " | " + std::to_string(rng_.uniform(4, 60)) + " | " +
             std::to_string(rng_.uniform(2, 250)) + "." + std::to_string(rng_.uniform(0, 9)) + " | " +
             std::to_string(rng_.uniform(8, 90)) + " | " + format_date(go_live) + " |\n";
    }
    return out;
  }

  std::string milestone_table(int today, const std::vector<Person>& team) {
    std::string out = "Table B. Milestones\n| ID | Milestone | Owner | Due | Depends on |\n|---|---|---|---|---|\n";
    const int rows = rng_.uniform(5, static_cast<int>(kMilestones.size()));
    int due = today;
    for (int i = 0; i < rows; ++i) {
      due += rng_.uniform(14, 45);
      // Appending rather than one operator+ chain: g++ 12 raises a false -Wrestrict on the latter.
      out += "| M" + std::to_string(i + 1) + " | " + kMilestones[static_cast<size_t>(i)] + " | ";
      out += rng_.pick(team).full + " | " + format_date(due) + " | ";
      out += i == 0 ? std::string("-") : std::string("M") + std::to_string(i);
      out += " |\n";
    }
    return out;
  }

  Rng rng_;
  const Domain& d_;
  int spent_ = 0;
};

}  // namespace

std::string project_brief(uint64_t seed) { return BriefWriter(seed).write(); }

}  // namespace agentkv::text
