// debate: 4-8 speakers argue a motion over several rounds. Each speaker reads its private role card
// and the whole transcript so far; the transcript only ever grows at its end, so round r's prompt
// shares the speaker's round r-1 prompt up to the old transcript end (prefix caching across rounds).
#include <string>
#include <vector>

#include "persona_text.h"
#include "workload_internal.h"

namespace agentkv {

namespace {

using Words = std::vector<std::string>;

struct Motion {
  std::string text;
  Words for_points;
  Words against_points;
};

const std::vector<Motion> kMotions = {
    {"This house would ban private cars from city centers.",
     {"City centers without cars have cleaner air, and asthma cases drop within a few years.",
      "Space now used for parking could become parks, housing and wider sidewalks.",
      "Buses and trams become faster and more reliable once they no longer sit in traffic."},
     {"Shops in the center lose customers who cannot carry their purchases home on a bus.",
      "Older and disabled residents depend on cars and would be cut off from the center.",
      "Traffic would simply move to the edge of the center and clog residential streets."}},
    {"This house believes that homework should be abolished in primary schools.",
     {"Young children learn more from play, sleep and family time than from worksheets.",
      "Homework widens the gap between children whose parents can help and those whose parents cannot.",
      "Studies find little link between homework and achievement before the age of eleven."},
     {"Short daily practice builds reading and arithmetic habits that class time alone cannot.",
      "Homework shows parents what their children are learning and invites them to take part.",
      "Children who never practice alone struggle with independent study later on."}},
    {"This house would replace final exams with continuous assessment.",
     {"A single exam day rewards memorization and punishes students who happen to have a bad day.",
      "Continuous assessment warns teachers early when a student falls behind.",
      "Projects and coursework are closer to the work people do after school."},
     {"Coursework is easier to copy, to outsource, or to have written by a chatbot.",
      "Constant grading turns every week into an exam and raises stress instead of lowering it.",
      "Exams are the one measure that treats every student exactly the same way."}},
    {"This house believes that social media has done more harm than good.",
     {"Teenage anxiety and depression rose sharply in the years when smartphones spread.",
      "Recommendation algorithms reward outrage and spread false stories faster than corrections.",
      "Endless feeds are designed to capture attention, not to serve the people using them."},
     {"Social media lets isolated people find communities and support they never had before.",
      "Protest movements and small businesses have reached audiences that were closed to them.",
      "The harms come from specific designs that can be regulated, not from connecting people."}},
    {"This house would introduce a four-day working week.",
     {"Trials in several countries kept output steady while sick days and burnout fell.",
      "A three-day weekend gives parents time for care and lets workers rest properly.",
      "Fewer commuting days cut traffic, emissions and office costs."},
     {"Hospitals, shops and schools cannot close for a day, so their staff would be left out.",
      "Cramming five days of work into four makes each day longer and more exhausting.",
      "Small firms would lose customers to competitors who stay open."}},
    {"This house believes that space exploration is worth its cost.",
     {"Satellites for weather, navigation and communication came out of space programs.",
      "Exploration inspires students to study science and engineering.",
      "Learning to live beyond Earth protects humanity against a disaster on one planet."},
     {"The same money would save more lives if spent on health, housing and climate at home.",
      "Robots already explore more cheaply and safely than crewed missions.",
      "Private space races mostly serve the prestige of billionaires and governments."}},
    {"This house would make public transport free for everyone.",
     {"Free fares bring more riders, fewer cars and cleaner air.",
      "Ticket machines, inspectors and fare systems eat a large share of what fares bring in.",
      "Free transport helps the poorest most, since they spend the largest share of income on travel."},
     {"Without fare income, services must be paid for by higher taxes or cut back.",
      "Crowded buses get worse when demand grows faster than the fleet.",
      "People value what they pay for, and free systems suffer from vandalism and waste."}},
    {"This house would ban new fast-food outlets near schools.",
     {"Children eat what is cheap and close, and a ban changes what is close.",
      "Obesity rates are higher around schools with many fast-food outlets nearby.",
      "Cities already restrict alcohol and gambling near schools, and junk food is a similar case."},
     {"Children will simply walk a little further or bring snacks from home.",
      "Bans punish small family businesses far more than the large chains.",
      "Teaching cooking and nutrition works better than controlling where shops may open."}},
};

const Words kBackgrounds = {"a schoolteacher",       "an economics student",
                            "a nurse with twenty years on the ward", "the owner of a small hardware shop",
                            "a city planner",                "a software engineer",
                            "a local journalist",            "a dairy farmer",
                            "a union organizer",             "a philosophy lecturer",
                            "a former professional cyclist", "a public defender"};

const Words kHobbies = {"spends weekends restoring old clocks",     "coaches a youth football team",
                        "writes crime novels nobody has read yet", "keeps bees on a rooftop",
                        "plays bass in a cover band",              "collects maps of cities that no longer exist",
                        "volunteers at the food bank",             "swims in the sea all year round",
                        "runs a chess club for teenagers",         "grows chili peppers in a greenhouse"};

const Words kStyles = {"calm and data-driven: cites numbers, studies and sources",
                       "passionate: appeals to values and tells human stories",
                       "Socratic: asks pointed questions that expose weak assumptions",
                       "humorous: uses wit to disarm opponents before landing the point",
                       "legalistic: argues about definitions, precedent and burden of proof",
                       "pragmatic: focuses on costs, trade-offs and how things would really work",
                       "historical: draws lessons from what happened in other times and places",
                       "combative: rebuts the previous speakers directly and relentlessly",
                       "diplomatic: finds common ground first and then presses the difference",
                       "visionary: paints the long-term future the motion would create"};

const Words kTactics = {"open with a concrete example before making the general point",
                        "quote an opponent's words back and show the flaw in them",
                        "end every argument with a short, memorable line",
                        "concede a small point in order to win a larger one",
                        "ask the audience a question it cannot ignore",
                        "compare the motion to a familiar everyday situation",
                        "use one striking number rather than many",
                        "name the strongest opposing argument and answer it first",
                        "tell a short personal story that makes the stakes real",
                        "stay brief and let a pause do the work"};

class DebateWorkload : public WorkloadBase {
 public:
  explicit DebateWorkload(const WorkloadOptions& opt)
      : WorkloadBase("debate", opt), cast_(text::make_cast(opt.seed, opt.n_agents)) {
    text::Rng rng(text::derive_seed(opt.seed, text::kStreamDebate));
    motion_ = &rng.pick(kMotions);
    transcript_ = "Debate transcript. Motion: \"" + motion_->text + "\"\nSpeakers: ";
    for (int i = 0; i < opt.n_agents; ++i) {
      transcript_ += (i > 0 ? ", " : "") + cast_[static_cast<size_t>(i)].full + " (" + side(i) + ")";
      role_cards_.push_back(role_card(i));
    }
    transcript_ += ".\n";
    visible_end_.push_back(transcript_.size());
  }

  std::vector<AgentTurn> round(int r) override {
    cursor_.begin_round(r);
    // Round r sees the header and rounds 0..r-1 (a round asked for again sees what it saw before).
    const std::string shared = transcript_.substr(0, visible_end_[static_cast<size_t>(r)]);
    std::vector<AgentTurn> turns;
    for (int i = 0; i < opt_.n_agents; ++i) {
      const std::string& who = cast_[static_cast<size_t>(i)].full;
      AgentTurn t;
      t.agent = i;
      t.max_tokens = 60;
      t.min_tokens = 25;
      t.prompt = role_cards_[static_cast<size_t>(i)];
      t.private_end = t.prompt.size();
      t.prompt += shared;
      t.shared_end = t.prompt.size();
      t.prompt += who + ", give your argument for round " + std::to_string(r + 1) + " (" + side(i) +
                  " the motion, two or three sentences):\n" + line_start(r, who);
      turns.push_back(std::move(t));
    }
    return turns;
  }

  void record(int r, const std::vector<std::string>& replies) override {
    cursor_.end_round(r, replies.size(), static_cast<size_t>(opt_.n_agents));
    for (int i = 0; i < opt_.n_agents; ++i) {
      transcript_ += line_start(r, cast_[static_cast<size_t>(i)].full) + " " +
                     clean_reply(replies[static_cast<size_t>(i)]) + "\n";
    }
    visible_end_.push_back(transcript_.size());
  }

 private:
  static const char* side(int agent) { return agent % 2 == 0 ? "for" : "against"; }
  static std::string line_start(int r, const std::string& who) {
    return "Round " + std::to_string(r + 1) + " \xE2\x80\x94 " + who + ":";  // em dash
  }
  std::string role_card(int agent) const {
    const text::Person& me = cast_[static_cast<size_t>(agent)];
    text::Rng rng(text::derive_seed(opt_.seed, text::kStreamRole, static_cast<uint64_t>(agent)));
    Words points = agent % 2 == 0 ? motion_->for_points : motion_->against_points;
    rng.shuffle(points);
    std::string out = "Debate role card for " + me.full + " (private: only " + me.first +
                      " sees this card)\nMotion: \"" + motion_->text + "\"\nSide: " + me.first + " argues " +
                      (agent % 2 == 0 ? "FOR" : "AGAINST") + " the motion.\nBackground: " + me.first + " is " +
                      rng.pick(kBackgrounds) + ", " + std::to_string(rng.uniform(19, 71)) + " years old, who " +
                      rng.pick(kHobbies) + ".\nDebating style: " + rng.pick(kStyles) + ".\nPoints " + me.first +
                      " plans to make:\n";
    for (const std::string& p : points) out += "- " + p + "\n";
    out += "Favorite tactic: " + rng.pick(kTactics) +
           ".\nHouse rules: every speaker keeps to their side, speaks two or three sentences a round, "
           "answers the other speakers by name and never repeats an earlier argument word for word.\n\n";
    return out;
  }

  std::vector<text::Person> cast_;
  const Motion* motion_ = nullptr;
  std::vector<std::string> role_cards_;
  std::string transcript_;           // header + every recorded round's lines
  std::vector<size_t> visible_end_;  // [r]: the transcript length round r reads
};

}  // namespace

std::unique_ptr<Workload> make_debate_workload(const WorkloadOptions& opt) {
  return std::make_unique<DebateWorkload>(opt);
}

}  // namespace agentkv
