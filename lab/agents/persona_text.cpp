#include "persona_text.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "util/status.h"

namespace agentkv::text {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int Rng::uniform(int lo, int hi) {
  AGENTKV_CHECK(lo <= hi);
  const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo) + 1;
  // Multiply-shift instead of modulo: no bias worth speaking of, and no division.
  const auto scaled = static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * span) >> 64);
  return static_cast<int>(lo + static_cast<int64_t>(scaled));
}

std::vector<int> Rng::sample(int n, int k) {
  AGENTKV_CHECK(k >= 0 && k <= n);
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  for (int i = 0; i < k; ++i) std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(uniform(i, n - 1))]);
  all.resize(static_cast<size_t>(k));
  return all;
}

int Deck::next() {
  if (pos_ == order_.size()) {
    order_ = rng_.sample(n_, n_);
    pos_ = 0;
  }
  return order_[pos_++];
}

uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t index) {
  Rng r(seed ^ (stream * 0xD1B54A32D192ED03ull));
  r.next();
  Rng s(r.next() ^ (index * 0x9E3779B97F4A7C15ull + stream));
  return s.next();
}

namespace {

using Words = std::vector<std::string>;

const Words kFirstNames = {
    "Anna",   "Marco",   "Priya",  "Tomas",   "Aiko",   "Kwame",   "Elena",  "Jonas",   "Fatima",
    "Liam",   "Sofia",   "Mateo",  "Ingrid",  "Ravi",   "Chloe",   "Diego",  "Hana",    "Oskar",
    "Leila",  "Samuel",  "Nadia",  "Felix",   "Mei",    "Arjun",   "Clara",  "Emeka",   "Yuki",
    "Hugo",   "Zara",    "Pavel",  "Lucia",   "Omar",   "Greta",   "Kenji",  "Amara",   "Theo",
    "Isabel", "Malik",   "Freya",  "Rafael",  "Noor",   "Emil",    "Carmen", "Tariq",   "Astrid",
    "Luca",   "Imani",   "Bruno",  "Vera",    "Sanjay", "Maeve",   "Idris",  "Rosa",    "Anton",
    "Keiko",  "Dante",   "Ayla",   "Victor",  "Selma",  "Jasper",  "Mira",   "Nikolai", "Paloma",
    "Ezra",   "Lina",    "Gideon", "Tala",    "Ruben",  "Esme",    "Kofi",   "Ines",    "Milo",
    "Dara",   "Bastian", "Yara",   "Otto",    "Celeste", "Arlo",   "Sunita", "Wren"};

const Words kLastNames = {
    "Kowalski", "Rossi",    "Sharma",  "Novak",     "Tanaka",  "Mensah",   "Petrova",  "Berg",
    "Haddad",   "O'Brien",  "Garcia",  "Lindqvist", "Patel",   "Dubois",   "Moreno",   "Sato",
    "Andersen", "Nasser",   "Okafor",  "Fischer",   "Chen",    "Iyer",     "Romano",   "Adeyemi",
    "Kim",      "Laurent",  "Vega",    "Costa",     "Nowak",   "Ivanova",  "Hughes",   "Silva",
    "Yamada",   "Bianchi",  "Osei",    "Keller",    "Ramirez", "Holm",     "Farah",    "Delgado",
    "Mwangi",   "Horvat",   "Quinn",   "Reyes",     "Nakamura", "Sorensen", "Abbasi",  "Moretti",
    "Lund",     "Castillo", "Brennan", "Varga",     "Ortiz",   "Takahashi", "Kruger",  "Almeida",
    "Santos",   "Weber",    "Mbeki",   "Byrne"};

const Words kTownNames = {"Willowbrook", "Alder Cove", "Maple Hollow", "Brightwater",
                          "Stonebridge", "Pinecrest",  "Harbor Glen",  "Ashford",
                          "Elmstead",    "Fernvale",   "Larkspur",     "Cedar Falls"};

const Words kPlaces = {"the town square",       "the public library",        "Hobbs Cafe",
                       "the Sunrise Bakery",    "the riverside park",        "the farmers' market",
                       "the old mill",          "the community garden",      "the harbor",
                       "the train station",     "the pharmacy",              "the elementary school",
                       "the town hall",         "the hardware store",        "the bookshop on Elm Street",
                       "the Blue Heron pub",    "the clinic",                "the fire station",
                       "the art studio",        "the bus stop on Main Street", "the lighthouse",
                       "the bridge over the Alder River", "the co-op grocery", "the music hall",
                       "the bowling alley",     "the swimming pool",         "the church steps",
                       "the laundromat",        "the bike repair shop",      "the community center"};

struct Occupation {
  const char* title;
  const char* workplace;
};

const std::vector<Occupation> kOccupations = {
    {"librarian", "the public library"},          {"baker", "the Sunrise Bakery"},
    {"barista", "Hobbs Cafe"},                    {"pharmacist", "the pharmacy"},
    {"teacher", "the elementary school"},         {"nurse", "the clinic"},
    {"firefighter", "the fire station"},          {"painter", "the art studio"},
    {"carpenter", "the hardware store"},          {"fisher", "the harbor"},
    {"ticket clerk", "the train station"},        {"mayor's assistant", "the town hall"},
    {"bookseller", "the bookshop on Elm Street"}, {"bartender", "the Blue Heron pub"},
    {"gardener", "the community garden"},         {"vegetable seller", "the farmers' market"},
    {"mechanic", "the bike repair shop"},         {"lighthouse keeper", "the lighthouse"},
    {"cellist", "the music hall"},                {"lifeguard", "the swimming pool"},
    {"doctor", "the clinic"},                     {"journalist", "the Weekly Gazette office"},
    {"postal worker", "the post office"},         {"grocer", "the co-op grocery"},
    {"cook", "the Blue Heron pub kitchen"},       {"florist", "the flower stall by the square"},
    {"tailor", "a small shop on Main Street"},    {"veterinarian", "the animal clinic"},
    {"architect", "a studio above the bank"},     {"bus driver", "the town bus depot"},
    {"historian", "the town museum"},             {"software developer", "a desk at home"},
    {"yoga instructor", "the community center"},  {"beekeeper", "the hives behind the old mill"},
    {"photographer", "a studio near the harbor"}, {"potter", "the art studio"},
    {"student", "the community college"},         {"retired engineer", "the old mill museum"},
    {"plumber", "jobs all over town"},            {"social worker", "the town hall annex"}};

const Words kTraits = {
    "curious",     "patient",     "stubborn",   "generous",  "shy",         "talkative",
    "ambitious",   "forgetful",   "meticulous", "cheerful",  "anxious",     "witty",
    "skeptical",   "kind",        "impulsive",  "proud",     "gentle",      "competitive",
    "dreamy",      "practical",   "loyal",      "nosy",      "calm",        "sarcastic",
    "optimistic",  "grumpy",      "warm",       "cautious",  "adventurous", "sentimental",
    "blunt",       "diplomatic",  "hardworking", "playful",  "serious",     "absent-minded",
    "brave",       "jealous",     "thoughtful", "funny",     "private",     "restless",
    "organized",   "messy",       "honest",     "secretive", "romantic",    "frugal",
    "hospitable",  "moody"};

const Words kHomes = {"a small apartment above the bakery", "a blue house by the harbor",
                      "a cottage at the edge of the forest", "a shared flat near the train station",
                      "the family farm north of town",      "a narrow townhouse on Elm Street",
                      "a houseboat on the Alder River",     "a room rented from an elderly couple",
                      "a renovated barn near the old mill", "a modern flat next to the town hall",
                      "the house the family has owned for three generations",
                      "a caravan behind the community garden"};

const Words kGoals = {"open a small shop of their own",
                      "finish writing a history of the family",
                      "win the chess tournament this autumn",
                      "organize the best harvest festival the town has seen",
                      "learn to play the violin",
                      "repair the old boat in the garage",
                      "get elected to the town council",
                      "run a half marathon before winter",
                      "make peace with an estranged sibling",
                      "grow the biggest pumpkin at the fair",
                      "learn Italian before a trip next year",
                      "adopt a dog from the shelter",
                      "save enough money for a trip to the mountains",
                      "start a podcast about the town's history",
                      "convince the council to build a bike lane",
                      "find a new apartment closer to work",
                      "teach the neighborhood kids to swim",
                      "publish a short story in a real magazine",
                      "restore the mural at the train station",
                      "spend more time with family and less at work"};

const Words kRelations = {"next-door neighbor",  "old school friend",  "coworker",
                          "cousin",              "rival at the chess club", "landlord",
                          "former partner",      "mentor",             "former student",
                          "business partner",    "running buddy",      "younger sibling",
                          "book club friend",    "regular customer",   "childhood friend",
                          "tenant",              "fellow volunteer",   "choir partner",
                          "fishing companion",   "new acquaintance",   "in-law",
                          "godparent",           "opponent at town meetings", "gardening partner"};

const Words kAttitudes = {"trusts them completely",
                          "finds them a little tiresome",
                          "owes them a favor",
                          "secretly admires them",
                          "is still annoyed about an old argument with them",
                          "enjoys their jokes",
                          "worries about their health",
                          "wants their advice on a big decision",
                          "feels competitive with them",
                          "thinks they work too hard",
                          "hopes to see more of them",
                          "does not quite trust them",
                          "lends them books",
                          "shares Sunday lunches with them",
                          "misses how close they used to be",
                          "keeps their spare key",
                          "is helping them move house",
                          "has a quiet crush on them",
                          "feels protective of them",
                          "argues with them about politics"};

const Words kMornings = {"goes for a run along the river",   "reads the newspaper over black coffee",
                         "feeds the cats and waters the balcony plants", "does the crossword",
                         "walks the dog to the harbor and back", "practices the piano for half an hour",
                         "stretches on the back porch",      "bakes bread for the household",
                         "listens to the radio news",        "cycles to the bakery for fresh rolls",
                         "writes in a diary",                "swims at the public pool",
                         "tends the vegetable patch",        "checks the tide tables",
                         "meditates for twenty minutes",     "irons clothes while listening to podcasts"};

const Words kHours = {"from nine to five", "from seven until three", "in the afternoons",
                      "most mornings",     "on rotating shifts",     "from ten until six"};

const Words kLunches = {"eats lunch at Hobbs Cafe", "brings a packed lunch from home",
                        "skips lunch more often than is healthy",
                        "shares lunch with coworkers on the bench outside",
                        "grabs a sandwich from the co-op grocery", "goes home for a long lunch"};

const Words kEvenings = {"plays cards at the Blue Heron pub", "cooks something elaborate",
                         "calls family on the phone",         "reads novels on the sofa",
                         "goes to choir practice",            "works on a model ship",
                         "watches old films",                 "walks along the harbor",
                         "takes evening classes at the community center", "plays chess online",
                         "tidies the garden",                 "writes letters",
                         "repairs old furniture",             "practices the guitar",
                         "visits friends in the neighborhood", "volunteers at the animal shelter"};

const Words kTopics = {"the new bus schedule",       "the upcoming harvest festival",
                       "rising rent prices",         "the broken streetlight on Elm Street",
                       "a novel about sailors",      "the mayor's last speech",
                       "the library's fundraiser",   "rumors of a new supermarket",
                       "the school play",            "the strange weather this spring",
                       "a lost dog",                 "the river flooding again",
                       "the bakery's new sourdough", "plans for a skate park",
                       "the town's 150th anniversary", "the local elections",
                       "a mysterious letter",        "the closing of the old mill",
                       "jazz night at the music hall", "the bird migration",
                       "a recipe for plum cake",     "the football match on Sunday",
                       "the tomato blight in the community garden", "the price of fish",
                       "a painting exhibition",      "the new doctor at the clinic",
                       "the lighthouse restoration", "the chess tournament",
                       "tourists in summer",         "the power outage last week",
                       "the pub quiz",               "a traveling circus",
                       "the recycling program",      "the bike lane proposal",
                       "the school science fair",    "an old photograph of the town",
                       "the choir's concert",        "volunteering at the shelter",
                       "a wedding next month",       "the ferry timetable"};

const Words kFeelings = {"happy",     "uneasy",    "proud",     "embarrassed", "grateful",
                         "annoyed",   "hopeful",   "nostalgic", "curious",     "relieved",
                         "lonely",    "excited",   "guilty",    "amused",      "worried",
                         "calm",      "jealous",   "inspired",  "tired but content", "confused",
                         "touched",   "restless",  "hurt",      "determined",  "surprised",
                         "peaceful",  "frustrated", "flattered", "suspicious", "cheerful"};

const Words kObjects = {"a heavy box of books", "a broken bicycle chain", "a stack of festival posters",
                        "a toolbox", "a basket of apples", "a letter to the council",
                        "the chairs for the town meeting", "a wool scarf", "an old radio",
                        "a birthday cake", "seedlings for the garden", "a ladder",
                        "the tax forms", "a torn fishing net", "a jar of honey",
                        "a borrowed umbrella", "a map of the hiking trails", "a set of keys",
                        "a wobbly table", "a crate of empty bottles"};

const Words kWeather = {"rainy", "windy", "foggy", "sunny", "cold",  "humid",
                        "grey",  "snowy", "bright", "stormy", "mild", "chilly"};

const Words kEvents = {"a picnic",        "a surprise party",         "a fundraiser",
                       "a book swap",     "a cleanup of the riverbank", "a card night",
                       "a bake sale",     "a hike to the waterfall",  "a small concert",
                       "a garage sale",   "a poetry reading",         "a cooking class"};

const Words kTimesOfDay = {"early morning", "morning", "midday", "afternoon", "evening", "late night"};

// {A} the agent's first name, {B} another resident's, {P}/{Q} places, {T} a topic, {F} a feeling,
// {O} an object, {W} weather, {E} an event.
const Words kMemoryTemplates = {
    "{A} had coffee with {B} at {P} and they talked about {T}; {A} came away feeling {F}.",
    "{A} ran into {B} near {P} on a {W} afternoon, and the two of them argued about {T}. {A} felt "
    "{F} afterwards.",
    "At {P}, {B} asked {A} for help with {O}. {A} agreed, and felt {F} about it.",
    "{A} overheard {B} talking about {T} at {P} and felt {F}.",
    "{A} spent a quiet hour at {P} reading about {T}, feeling {F}.",
    "{A} and {B} started planning {E} at {P}; {A} is {F} about how it will go.",
    "{A} misplaced {O} somewhere between {P} and {Q}, felt {F}, and was relieved when {B} found it.",
    "{A} watched the {W} sky from {P} and kept thinking about {T}.",
    "{B} told {A} a secret about {T} on the way to {P}. {A} felt {F} and promised to keep quiet.",
    "{A} cooked dinner for {B}, and the talk drifted to {T}. The evening left {A} {F}.",
    "{A} noticed that {B} looked {F} at {P} and wondered whether it had to do with {T}.",
    "{A} volunteered at {P} for {E} and saw {B} there for the first time in weeks.",
    "{A} lost a friendly bet to {B} about {T} and had to carry {O} all the way to {P}.",
    "{A} wrote a long letter to {B} about {T}, then decided not to send it, feeling {F}.",
    "On a {W} day {A} walked from {P} to {Q}, waved to {B}, and felt {F}.",
    "{A} helped {B} deal with {O} at {P}; it took three hours and they laughed a lot.",
    "{A} heard at {P} that {B} is thinking of moving away, and felt {F}.",
    "{A} and {B} disagreed at {P} about who should organize {E}. {A} still feels {F}.",
    "{A} found an old photograph at {P} showing {B} as a child, and felt {F}.",
    "{A} gave a short speech about {T} at {P}; {B} clapped the loudest and {A} felt {F}."};

// Round 0 of the town workloads, with {town} filled in.
const Words kAnnouncements = {
    "The town council of {town} announces that the bridge over the Alder River will close for "
    "repairs starting next Monday, for at least six weeks. Residents are invited to a meeting at "
    "the town hall on Thursday evening to discuss detours, the ferry schedule and how local shops "
    "will cope.",
    "A storm is forecast to reach {town} tomorrow night, with strong winds and heavy rain. The fire "
    "station asks everyone to secure loose objects, check on elderly neighbors and stay away from "
    "the harbor until the warning is lifted. The community center will stay open as a shelter.",
    "{town} will hold its annual harvest festival this Saturday in the town square. Volunteers are "
    "needed for the bake sale, the music stage and the lantern parade, and the mayor will announce "
    "the winner of the pumpkin contest at sunset.",
    "The old mill of {town}, closed for twenty years, has been bought by an unknown buyer from the "
    "city. Some say it will become a hotel, others a factory or a museum. The council will reveal "
    "the plans at an open meeting next week and asks residents to send their questions in advance.",
    "The public library of {town} has lost its funding for next year and may close in the spring "
    "unless the town raises the money itself. The librarian is asking for ideas, donations and "
    "volunteers, and a first planning meeting is set for Friday.",
    "A mayoral election will take place in {town} in two weeks. Two candidates have announced: one "
    "promises a bike lane, a skate park and longer library hours; the other promises lower taxes, "
    "a bigger harbor and more parking in the center.",
    "A valuable painting has disappeared overnight from the town museum of {town}. The police ask "
    "anyone who was near the museum yesterday evening to come forward, and the museum offers a "
    "reward for information that leads to its return.",
    "A film crew will arrive in {town} next week to shoot a movie in the streets around the town "
    "square. They are looking for local extras, a cafe to rent for three days and a place to store "
    "their equipment, and some roads will be closed during filming."};

const int kMonthDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
const char* const kMonthNames[12] = {"January", "February", "March",     "April",   "May",      "June",
                                     "July",    "August",   "September", "October", "November", "December"};

}  // namespace

std::string fill_template(std::string_view tmpl, const TemplateVars& vars) {
  std::string out;
  out.reserve(tmpl.size() + 64);
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{') {
      const size_t close = tmpl.find('}', i);
      AGENTKV_CHECK(close != std::string_view::npos);
      const std::string_view key = tmpl.substr(i + 1, close - i - 1);
      bool found = false;
      for (const auto& [k, v] : vars) {
        if (k == key) {
          out += v;
          found = true;
          break;
        }
      }
      AGENTKV_CHECK(found);
      i = close;
    } else {
      out += tmpl[i];
    }
  }
  return out;
}

namespace {

std::string clock_time(int minutes) {
  minutes %= 24 * 60;
  const int m = minutes % 60;
  return std::to_string(minutes / 60) + (m < 10 ? ":0" : ":") + std::to_string(m);
}

struct Relationship {
  int other = 0;
  std::string relation;
  std::string attitude;
};

// Someone for a memory: mostly from the agent's relationships, sometimes anyone else in town.
int memory_partner(Rng& rng, const std::vector<Relationship>& rels, int n, int self) {
  if (!rels.empty() && rng.chance(70)) return rng.pick(rels).other;
  const int other = rng.uniform(0, n - 2);
  return other >= self ? other + 1 : other;
}

std::string memory_sentence(Rng& rng, const std::string& tmpl, const std::vector<Person>& cast, int self,
                            const std::vector<Relationship>& rels) {
  const std::string& p = rng.pick(kPlaces);
  std::string q = rng.pick(kPlaces);
  while (q == p) q = rng.pick(kPlaces);
  const int other = memory_partner(rng, rels, static_cast<int>(cast.size()), self);
  return fill_template(tmpl, {{"A", cast[static_cast<size_t>(self)].first},
                              {"B", cast[static_cast<size_t>(other)].first},
                              {"P", p},
                              {"Q", q},
                              {"T", rng.pick(kTopics)},
                              {"F", rng.pick(kFeelings)},
                              {"O", rng.pick(kObjects)},
                              {"W", rng.pick(kWeather)},
                              {"E", rng.pick(kEvents)}});
}

std::vector<std::string> distinct_words(Rng& rng, const Words& list, int k) {
  std::vector<std::string> out;
  for (int i : rng.sample(static_cast<int>(list.size()), k)) out.push_back(list[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

std::vector<Person> make_cast(uint64_t seed, int n) {
  const int combos = static_cast<int>(kFirstNames.size() * kLastNames.size());
  AGENTKV_CHECK(n >= 0 && n <= combos);
  Rng rng(derive_seed(seed, kStreamCast));
  // Distinct first names while they last, so short casts read naturally; then any free pair.
  std::vector<int> firsts = rng.sample(static_cast<int>(kFirstNames.size()), static_cast<int>(kFirstNames.size()));
  std::set<std::string> used;
  std::vector<Person> cast;
  cast.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Person p;
    const size_t fi = static_cast<size_t>(i) < firsts.size() ? static_cast<size_t>(firsts[static_cast<size_t>(i)])
                                                              : static_cast<size_t>(rng.uniform(0, static_cast<int>(kFirstNames.size()) - 1));
    p.first = kFirstNames[fi];
    do {
      p.full = p.first + " " + rng.pick(kLastNames);
      // A first name whose last names are all taken moves on to another first name.
      if (used.count(p.full) && rng.chance(10)) p.first = rng.pick(kFirstNames);
    } while (used.count(p.full));
    used.insert(p.full);
    cast.push_back(std::move(p));
  }
  return cast;
}

std::string format_date(int day_of_year) {
  int d = ((day_of_year % 365) + 365) % 365;
  int m = 0;
  while (d >= kMonthDays[m]) d -= kMonthDays[m++];
  return std::string(kMonthNames[m]) + " " + std::to_string(d + 1);
}

Town make_town(uint64_t seed) {
  Rng rng(derive_seed(seed, kStreamTown));
  Town t;
  t.name = rng.pick(kTownNames);
  t.today = rng.uniform(0, 364);
  return t;
}

std::string town_announcement(uint64_t seed, const Town& town) {
  Rng rng(derive_seed(seed, kStreamTown, 1));
  return fill_template(rng.pick(kAnnouncements), {{"town", town.name}});
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

std::string resident_profile(const std::vector<Person>& cast, int agent, const Town& town,
                             uint64_t seed, const ProfileShape& shape) {
  const int n = static_cast<int>(cast.size());
  AGENTKV_CHECK(n >= 2 && agent >= 0 && agent < n);
  Rng rng(derive_seed(seed, kStreamProfile, static_cast<uint64_t>(agent)));
  const Person& me = cast[static_cast<size_t>(agent)];
  const Occupation& job = rng.pick(kOccupations);
  const int age = job.title == std::string_view("student") ? rng.uniform(18, 26)
                  : job.title == std::string_view("retired engineer") ? rng.uniform(64, 84)
                                                                       : rng.uniform(22, 67);
  const std::vector<std::string> traits = distinct_words(rng, kTraits, shape.compact ? 2 : 3);
  const std::string goal = rng.pick(kGoals);

  std::vector<Relationship> rels;
  const int n_rels = std::min(n - 1, shape.compact ? 2 : rng.uniform(2, 5));
  for (int k : rng.sample(n - 1, n_rels)) {
    rels.push_back({k >= agent ? k + 1 : k, rng.pick(kRelations), rng.pick(kAttitudes)});
  }

  std::string out;
  if (shape.compact) {
    out = me.full + ", " + std::to_string(age) + ", " + job.title + " at " + job.workplace + " in " +
          town.name + ". Traits: " + join_list(traits) + ". Goal: " + goal + ".\nKnows ";
    std::vector<std::string> known;
    for (const Relationship& r : rels) known.push_back(cast[static_cast<size_t>(r.other)].full + " (" + r.relation + ")");
    out += join_list(known) + ".\nMemories:\n";
  } else {
    out = "Private notes about " + me.full + ", a resident of " + town.name + ". Only " + me.first +
          " can see these notes.\nName: " + me.full + "\nAge: " + std::to_string(age) +
          "\nOccupation: " + job.title + " at " + job.workplace + "\nHome: " + rng.pick(kHomes) +
          "\nTraits: " + join_list(traits) + "\nCurrent goal: " + goal + "\nRelationships:\n";
    for (const Relationship& r : rels) {
      out += "- " + cast[static_cast<size_t>(r.other)].full + ": " + r.relation + "; " + me.first + " " +
             r.attitude + ".\n";
    }
    const int wake = rng.uniform(22, 32) * 15;  // 5:30 .. 8:00
    const int bed = rng.uniform(86, 98) * 15;   // 21:30 .. 0:30
    out += "Daily routine: " + me.first + " wakes up at " + clock_time(wake) + ", " + rng.pick(kMornings) +
           ", works at " + job.workplace + " " + rng.pick(kHours) + ", " + rng.pick(kLunches) +
           ", and in the evening " + rng.pick(kEvenings) + ". Lights out around " + clock_time(bed) +
           ".\nMemories (oldest first):\n";
  }

  // Memories fill the profile up to a length drawn per agent. The longest memory line stays under
  // kSlack characters, so stopping at the first one that does not fit lands in [min, max].
  constexpr size_t kSlack = 260;
  AGENTKV_CHECK(shape.min_chars + kSlack + 2 <= shape.max_chars && out.size() < shape.min_chars);
  const size_t target = static_cast<size_t>(
      rng.uniform(static_cast<int>(shape.min_chars + kSlack), static_cast<int>(shape.max_chars - 2)));
  // Dated oldest first; templates come from a shuffled deck so consecutive memories differ.
  Deck deck(rng, static_cast<int>(kMemoryTemplates.size()));
  int day = town.today - rng.uniform(40, 70);
  int time = 0;
  for (;;) {
    const int gap = rng.uniform(0, 3);
    day += gap;
    time = gap == 0 ? rng.uniform(time, static_cast<int>(kTimesOfDay.size()) - 1)
                    : rng.uniform(0, static_cast<int>(kTimesOfDay.size()) - 1);
    std::string line = "- " + format_date(day);
    if (!shape.compact) line += ", " + kTimesOfDay[static_cast<size_t>(time)];
    line += ": " + memory_sentence(rng, kMemoryTemplates[static_cast<size_t>(deck.next())], cast, agent, rels);
    line += "\n";
    AGENTKV_CHECK(line.size() < kSlack);
    if (out.size() + line.size() > target) break;
    out += line;
  }
  out += "\n";
  return out;
}

}  // namespace agentkv::text
