"""QUAIL-B's prompt texts and label lists (public benchmark fsdatalab/quail-bench,
quail_b/prompts.py), kept word for word: they are the benchmark's data. Filter and
classification prompts take the document as `{0}`; join prompts name the two documents `{0}`
and `{1}`, as the benchmark's templates do."""

F1 = ("Judge strictly from the review above whether it mentions at least one positive aspect of "
      "the movie.\n\n{0}\n\nInstruction: answer TRUE if the review mentions at least one "
      "positive aspect of the movie, FALSE otherwise.")
F4 = ("Judge strictly from the review above whether it discusses the ending of the movie.\n\n"
      "{0}\n\nInstruction: answer TRUE if the review discusses the ending of the movie, FALSE "
      "otherwise.")
F5 = ("Judge strictly from the review above whether it mentions any specific actor or actress "
      "by name.\n\n{0}\n\nInstruction: answer TRUE if the review mentions a specific actor or "
      "actress by name, FALSE otherwise.")
DISCUSS_ASPECT = "Does the review in DOCUMENT {0} discuss the movie aspect in DOCUMENT {1}?"
ASPECT_SENTIMENT = ("Does the review in DOCUMENT {0} express positive sentiment about the movie "
                    "aspect in DOCUMENT {1}?")
SERIOUS_ADVERSE_EVENT = (
    "Judge strictly from the report above whether it describes a serious or life-threatening "
    "adverse event.\n\n{0}\n\nInstruction: answer TRUE if the report describes a serious or "
    "life-threatening adverse event, FALSE otherwise.")
REACTION = ("Does the medical report in DOCUMENT {0} describe the reaction in DOCUMENT {1} as "
            "something the patient experienced?")
NEUROLOGICAL_REACTION = "Is this reaction neurological, affecting the nervous system? {0}"
CARDIOVASCULAR_REACTION = ("Is this reaction cardiovascular, affecting the heart or blood "
                           "vessels? {0}")
AGENT_RECOVERED = (
    "Judge strictly from the agent trace above whether the agent recovered after pursuing an "
    "approach that did not work. Recovery means the agent recognized or moved past the "
    "unsuccessful approach and then made useful progress with a different or corrected "
    "approach.\n\n{0}\n\nInstruction: answer TRUE if the trace shows the agent recovering "
    "after an unsuccessful approach, FALSE otherwise.")
AGENT_IMPLEMENTED_FIX = (
    "Judge strictly from the agent trace above whether, by the end of the trace, the agent has "
    "implemented a plausible fix that directly addresses the reported issue. A fix must include "
    "a code or configuration change whose purpose is to correct the issue. Inspection, "
    "reproduction, tests without a fix, and unrelated edits do not count.\n\n{0}\n\n"
    "Instruction: answer TRUE if the agent has implemented a plausible fix that directly "
    "addresses the reported issue. Answer FALSE otherwise.")
F11 = ("Judge strictly from the claim above whether it asserts something about a person, rather "
       "than an organization, place, or event.\n\n{0}\n\nInstruction: answer TRUE if the claim "
       "asserts something about a person, FALSE otherwise.")
F12 = ("Judge strictly from the claim above whether it contains a specific date or year.\n\n{0}"
       "\n\nInstruction: answer TRUE if the claim contains a specific date or year, FALSE "
       "otherwise.")
SUPPORT = "Does the Wikipedia passage in DOCUMENT {1} support the claim in DOCUMENT {0}?"
REFUTE = ("Does the Wikipedia passage in DOCUMENT {1} refute or contradict the claim in "
          "DOCUMENT {0}?")
F13 = ("Judge strictly from the Wikipedia passage above whether it primarily describes a "
       "specific person (their life, actions, or role), rather than an organization, place, or "
       "event.\n\n{0}\n\nInstruction: answer TRUE if the passage primarily describes a specific "
       "person, FALSE otherwise.")
LEP1 = ("Judge strictly from the excerpt above whether it argues that the cited case's "
        "reasoning does not apply here.\n\n{0}\n\nInstruction: answer TRUE if the excerpt argues "
        "the cited case's reasoning does not apply here, FALSE otherwise.")
LEP2 = ("Judge strictly from the excerpt above whether it discusses a procedural or "
        "jurisdictional issue.\n\n{0}\n\nInstruction: answer TRUE if the excerpt discusses a "
        "procedural or jurisdictional issue, FALSE otherwise.")
LEPS1 = ("Judge strictly from the passage above whether it states a general legal rule.\n\n{0}"
         "\n\nInstruction: answer TRUE if the passage states a general legal rule, FALSE "
         "otherwise.")
LEPJOIN = "Is the passage in DOCUMENT {1} cited by the legal excerpt in DOCUMENT {0}?"

IMDB_SENTIMENT = ("Judge strictly from the review above which category best describes the "
                  "overall sentiment it expresses about the movie.\n\n{0}")
IMDB_SENTIMENT_LABELS = ("positive", "negative", "neutral", "mixed")
IMDB_ASPECT_SENTIMENT = ("Judge strictly from the review in DOCUMENT {0} what sentiment it "
                         "expresses about the movie aspect in DOCUMENT {1}.")
IMDB_ASPECT_SENTIMENT_LABELS = IMDB_SENTIMENT_LABELS
IMDB_GENRE = ("Judge strictly from the review above which genre best describes the movie it "
              "reviews.\n\n{0}")
IMDB_GENRE_LABELS = (
    "action", "adventure", "animation", "biography", "comedy", "crime", "documentary", "drama",
    "family", "fantasy", "history", "horror", "music", "musical", "mystery", "romance",
    "sci-fi", "sport", "thriller", "war", "western")
IMDB_COMPLAINT = ("Judge strictly from the review above what it criticizes most about the "
                  "movie.\n\n{0}")
IMDB_COMPLAINT_LABELS = (
    "poor acting", "poor writing", "poor visual effects", "slow pacing", "weak ending",
    "too long", "too violent", "no specific complaint")
BIO_ORGAN_CLASS = ("Judge strictly from the reaction above which MedDRA system organ class it "
                   "belongs to.\n\n{0}")
BIO_ORGAN_CLASS_LABELS = (
    "cardiac disorders", "vascular disorders", "nervous system disorders",
    "psychiatric disorders", "eye disorders", "ear and labyrinth disorders",
    "respiratory, thoracic and mediastinal disorders", "gastrointestinal disorders",
    "hepatobiliary disorders", "renal and urinary disorders",
    "skin and subcutaneous tissue disorders", "musculoskeletal and connective tissue disorders",
    "blood and lymphatic system disorders", "immune system disorders", "endocrine disorders",
    "metabolism and nutrition disorders", "infections and infestations",
    "neoplasms benign, malignant and unspecified",
    "injury, poisoning and procedural complications", "investigations",
    "general disorders and administration site conditions",
    "reproductive system and breast disorders", "pregnancy, puerperium and perinatal conditions",
    "congenital, familial and genetic disorders", "surgical and medical procedures",
    "social circumstances")
FEV_TOPIC = "Judge strictly from the claim above which topic it is about.\n\n{0}"
FEV_TOPIC_LABELS = ("politics", "sports", "film and television", "music", "literature",
                    "science", "history", "geography", "business", "religion", "other")
LEP_AREA = "Judge strictly from the excerpt above which area of law it concerns.\n\n{0}"
LEP_AREA_LABELS = (
    "constitutional law", "criminal law", "civil procedure", "civil rights", "contracts",
    "torts", "property", "administrative law", "employment law", "intellectual property",
    "tax law", "family law", "immigration law", "bankruptcy", "antitrust")
AGENT_OUTCOME = ("Judge strictly from the agent trace above whether the agent resolved the "
                 "reported issue by the end of the trace.\n\n{0}")
AGENT_OUTCOME_LABELS = ("resolved", "partially resolved", "not resolved", "gave up")
AGENT_OUTCOME_DESCRIPTIONS = (
    "made a change that fixes the reported issue", "fixed part of the issue but not all of it",
    "finished without a change that fixes the issue",
    "stopped early and said it could not continue")
AGENT_FAILURE = ("Judge strictly from the agent trace above what most caused the agent not to "
                 "resolve the issue.\n\n{0}")
AGENT_FAILURE_LABELS = (
    "misunderstood the issue", "could not reproduce the bug", "could not find the relevant code",
    "could not run the tests", "made an incorrect fix", "broke existing tests",
    "environment or tool error", "ran out of steps")
AGENT_FAILURE_DESCRIPTIONS = (
    "worked on a different problem than the one reported",
    "never saw the reported failure happen", "never found the code that causes the issue",
    "could not get the test suite to run",
    "changed the right code, but the change does not fix the issue",
    "fixed the issue but made other tests fail",
    "a broken setup, missing dependency, or tool failure blocked progress",
    "reached the step limit while still making progress")

# The benchmark's planner inputs (quail_b/queries.py: sf0.1 reference labels), used only by the
# bench's selectivity override (quail_testing/quailb/override.py): prompt -> share answered TRUE.
FILTER_SELECTIVITY = {
    F1: 4004 / 5000, F4: 1218 / 5000, F5: 2853 / 5000,
    SERIOUS_ADVERSE_EVENT: 319 / 500,
    NEUROLOGICAL_REACTION: 505 / 1127, CARDIOVASCULAR_REACTION: 394 / 1127,
    AGENT_RECOVERED: 570 / 1772, AGENT_IMPLEMENTED_FIX: 537 / 1772,
    F11: 296 / 500, F12: 69 / 500, F13: 159 / 287,
    LEP1: 14 / 500, LEP2: 229 / 500, LEPS1: 351 / 433,
}
JOIN_SELECTIVITY = {
    DISCUSS_ASPECT: 17683 / 60000, ASPECT_SENTIMENT: 9635 / 60000,
    REACTION: 19144 / 563500, SUPPORT: 311 / 143500, REFUTE: 477 / 143500,
    LEPJOIN: 500 / 216500,
}
# (classification prompt, accepted labels) -> share of rows whose label is accepted
IN_LIST_SELECTIVITY = {
    (IMDB_SENTIMENT, frozenset({"negative", "mixed"})): 2923 / 5000,
    (BIO_ORGAN_CLASS, frozenset({"cardiac disorders", "vascular disorders"})): 109 / 1127,
    (FEV_TOPIC, frozenset({"politics", "history"})): 46 / 500,
    (LEP_AREA, frozenset({"constitutional law", "criminal law"})): 159 / 500,
}
