package dataset

// commonWords are everyday lower-case English words that nearly every BPE or SentencePiece vocabulary
// holds as one token when preceded by a space. Calibrate keeps only those the model's own tokenizer
// confirms; the list is long enough that random draws from it make prompts no prefix cache can reuse.
var commonWords = []string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
	"not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
	"you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more",
	"when", "will", "would", "who", "so", "no", "she", "other", "its", "may", "these", "what", "them",
	"than", "some", "him", "time", "into", "only", "do", "out", "any", "then", "about", "over", "such",
	"our", "new", "most", "could", "also", "first", "two", "made", "after", "like", "many", "must",
	"people", "well", "where", "even", "back", "through", "years", "much", "before", "good", "each",
	"those", "way", "should", "because", "work", "long", "between", "both", "under", "never", "same",
	"while", "last", "might", "great", "old", "year", "off", "come", "since", "against", "go", "came",
	"right", "used", "take", "three", "small", "place", "own", "found", "world", "life", "day", "here",
	"down", "still", "part", "see", "house", "high", "every", "again", "make", "water", "little",
	"man", "state", "however", "form", "end", "general", "without", "number", "point", "given", "home",
	"during", "system", "public", "until", "order", "war", "often", "case", "large", "fact", "hand",
	"power", "law", "government", "country", "group", "present", "early", "best", "far", "side",
	"school", "city", "four", "next", "less", "family", "light", "set", "love", "being", "night",
	"once", "second", "thought", "head", "name", "service", "left", "local", "money", "body", "city",
	"music", "field", "today", "table", "free", "change", "market", "open", "young", "book", "line",
	"story", "room", "mind", "real", "land", "sure", "river", "sea", "air", "play", "car", "food",
	"five", "door", "road", "army", "war", "town", "art", "blue", "red", "green", "white", "black",
	"dark", "cold", "warm", "hot", "fire", "stone", "tree", "rain", "snow", "wind", "sun", "moon",
	"star", "king", "queen", "horse", "dog", "bird", "fish", "paper", "letter", "word", "voice",
	"child", "father", "mother", "friend", "woman", "girl", "boy", "doctor", "team", "game", "plan",
	"idea", "rule", "view", "price", "level", "energy", "model", "data", "test", "result", "value",
	"paint", "glass", "metal", "wood", "gold", "silver", "iron", "salt", "milk", "bread", "wine",
	"garden", "window", "street", "bridge", "island", "hill", "valley", "forest", "lake", "coast",
	"north", "south", "east", "west", "summer", "winter", "spring", "morning", "evening", "week",
	"month", "hour", "minute", "simple", "strong", "quick", "slow", "happy", "short", "clear", "full",
	"easy", "hard", "true", "deep", "wide", "heavy", "soft", "loud", "quiet", "rich", "poor", "safe",
}
